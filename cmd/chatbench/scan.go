package main

import (
	"bytes"
	"math"
)

// The fan-out reader finds the few fields it needs by scanning the event's
// bytes instead of decoding it: a JSON decode per delivery would cost the
// generator more than the server spends sending it. Both chatd and the bare
// hub encode with encoding/json (no spaces); the scanner also takes spaces
// around the colon. Inside a JSON string a '"' is always escaped, so a
// `"key":"` sequence is structure, never text.

// strField returns the raw (still escaped) value of the first string field
// named key, or nil.
func strField(ev []byte, key string) []byte {
	for off := 0; off < len(ev); {
		i := bytes.Index(ev[off:], []byte(`"`+key+`"`))
		if i < 0 {
			return nil
		}
		j := off + i + len(key) + 2
		off = j
		for j < len(ev) && ev[j] == ' ' {
			j++
		}
		if j >= len(ev) || ev[j] != ':' {
			continue
		}
		j++
		for j < len(ev) && ev[j] == ' ' {
			j++
		}
		if j >= len(ev) || ev[j] != '"' {
			continue
		}
		j++
		k := j
		for k < len(ev) && ev[k] != '"' {
			if ev[k] == '\\' {
				k++
			}
			k++
		}
		if k > len(ev) {
			return nil
		}
		return ev[j:min(k, len(ev))]
	}
	return nil
}

// eventType is the event's "type" (nil if none). The top-level "type" is
// the first key both servers write, and no nested object of a docs/PROTOCOL.md
// event has one.
func eventType(ev []byte) []byte {
	if bytes.HasPrefix(ev, []byte(`{"type":"`)) { // the common case, without a search
		p := ev[9:]
		if i := bytes.IndexByte(p, '"'); i >= 0 {
			return p[:i]
		}
	}
	return strField(ev, "type")
}

// fanText is what a fan-out say carries in its text:
// "fb <phase> <sender> <seq> <unix ns> <padding>".
type fanText struct {
	phase, sender, seq int
	ns                 int64
}

// parseFanText reads a fan-out say's text from a message event.
func parseFanText(ev []byte) (fanText, bool) {
	t := strField(ev, "text")
	if !bytes.HasPrefix(t, []byte("fb ")) {
		return fanText{}, false
	}
	t = t[3:]
	var m fanText
	var ok bool
	var v int64
	if v, t, ok = uintField(t, ' '); !ok {
		return m, false
	}
	m.phase = int(v)
	if v, t, ok = uintField(t, ' '); !ok {
		return m, false
	}
	m.sender = int(v)
	if v, t, ok = uintField(t, ' '); !ok {
		return m, false
	}
	m.seq = int(v)
	if m.ns, _, ok = uintField(t, ' '); !ok {
		return m, false
	}
	return m, true
}

// parseRef reads a fan-out ref, "p<phase>-<seq>-<unix ns>", from an ack or
// error event.
func parseRef(ev []byte) (phase, seq int, ns int64, ok bool) {
	r := strField(ev, "ref")
	if len(r) < 2 || r[0] != 'p' {
		return 0, 0, 0, false
	}
	var v int64
	if v, r, ok = uintField(r[1:], '-'); !ok {
		return
	}
	phase = int(v)
	if v, r, ok = uintField(r, '-'); !ok {
		return
	}
	seq = int(v)
	ns, _, ok = uintField(r, '-')
	return
}

// uintField reads decimal digits up to sep (or the end) and returns the
// value and what follows sep.
func uintField(b []byte, sep byte) (int64, []byte, bool) {
	var v int64
	i := 0
	for ; i < len(b) && b[i] != sep; i++ {
		c := b[i]
		if c < '0' || c > '9' || v > (math.MaxInt64-9)/10 {
			return 0, nil, false
		}
		v = v*10 + int64(c-'0')
	}
	if i == 0 {
		return 0, nil, false
	}
	if i < len(b) {
		i++ // the separator
	}
	return v, b[i:], true
}
