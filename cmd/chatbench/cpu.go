package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// clkTck is the kernel's USER_HZ, the unit of /proc/<pid>/stat's times: 100
// on every Linux architecture Go runs on.
const clkTck = 100

// cpuTicks returns a process's user + system CPU time in clock ticks from
// /proc/<pid>/stat (pid 0: this process).
func cpuTicks(pid int) (int64, error) {
	path := "/proc/self/stat"
	if pid > 0 {
		path = fmt.Sprintf("/proc/%d/stat", pid)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return parseStatTicks(b)
}

// parseStatTicks reads utime + stime (fields 14 and 15) from a
// /proc/<pid>/stat line; the command name (field 2) may hold spaces and
// parentheses, so fields are counted after its last ')'.
func parseStatTicks(b []byte) (int64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("/proc stat: no ')'")
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat: %d fields after the name", len(f))
	}
	u, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	s, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc stat: %w", err)
	}
	return u + s, nil
}

// cpuMeter measures the CPU that processes use over a span of wall time.
type cpuMeter struct {
	pids []int // 0 is this process
	t0   []int64
	at   time.Time
}

// startCPU starts measuring pids (0 = this process; a pid it cannot read
// counts as unknown).
func startCPU(pids ...int) *cpuMeter {
	m := &cpuMeter{pids: pids, t0: make([]int64, len(pids)), at: time.Now()}
	for i, p := range pids {
		t, err := cpuTicks(p)
		if err != nil {
			t = -1
		}
		m.t0[i] = t
	}
	return m
}

// cores returns, per pid, the CPU used since startCPU in cores (1.0 = one
// core busy the whole time); -1 for a pid it could not read.
func (m *cpuMeter) cores() []float64 {
	wall := time.Since(m.at).Seconds()
	out := make([]float64, len(m.pids))
	for i, p := range m.pids {
		t, err := cpuTicks(p)
		if err != nil || m.t0[i] < 0 || wall <= 0 {
			out[i] = -1
			continue
		}
		out[i] = float64(t-m.t0[i]) / clkTck / wall
	}
	return out
}

// sysCounts are a process's cumulative system-call and wakeup counts:
// read-family and write-family calls (/proc/<pid>/io syscr, syscw, every
// thread) and the voluntary context switches of its main thread
// (/proc/<pid>/status), which for Redis is the event loop: each one is a
// sleep in epoll_wait and a wakeup after it. They tell where a server's
// CPU per operation goes when the work per call is small: a round trip
// costs a wakeup, a read and a write whatever it carries.
type sysCounts struct {
	reads, writes, wakeups int64
}

// readSysCounts reads pid's sysCounts.
func readSysCounts(pid int) (sysCounts, error) {
	var c sysCounts
	ioText, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return c, err
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return c, err
	}
	return parseSysCounts(ioText, st)
}

// parseSysCounts reads sysCounts from the text of /proc/<pid>/io and
// /proc/<pid>/status.
func parseSysCounts(ioText, status []byte) (sysCounts, error) {
	var c sysCounts
	found := 0
	for _, src := range [][]byte{ioText, status} {
		for _, l := range bytes.Split(src, []byte{'\n'}) {
			k, v, ok := bytes.Cut(l, []byte{':'})
			if !ok {
				continue
			}
			var dst *int64
			switch string(k) {
			case "syscr":
				dst = &c.reads
			case "syscw":
				dst = &c.writes
			case "voluntary_ctxt_switches":
				dst = &c.wakeups
			default:
				continue
			}
			n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			if err != nil {
				return c, fmt.Errorf("/proc %s %q: %w", k, v, err)
			}
			*dst = n
			found++
		}
	}
	if found != 3 {
		return c, errors.New("/proc: no syscr, syscw or voluntary_ctxt_switches")
	}
	return c, nil
}
