// RealtimeConnection: the connection loop of RealtimeClient — open the
// current URL, read its events, and on a drop move to the next URL, wait a
// backoff delay and open again; on each hello, resume every room after its
// last delivered id and resend what is pending.

using System;
using System.Collections.Generic;
using System.IO;
using System.Net.WebSockets;
using System.Text;
using System.Threading.Tasks;

namespace Chatd
{
    public sealed partial class RealtimeClient
    {
        async Task Run()
        {
            var failures = 0;
            while (!life.IsCancellationRequested)
            {
                string url;
                lock (mu) url = o.Urls[urlIndex % o.Urls.Count];
                var w = new ClientWebSocket();
                var opened = false;
                Exception refused = null;
                int code = 0;
                string reason = "";
                try
                {
                    var sep = url.Contains("?") ? "&" : "?";
                    await w.ConnectAsync(new Uri(url + sep + "batch=1&token=" + Uri.EscapeDataString(o.Token() ?? "")), life.Token).ConfigureAwait(false);
                    lock (mu) ws = w;
                    opened = true;
                    await Receive(w, () => failures = 0).ConfigureAwait(false);
                    if (w.CloseStatus.HasValue)
                    {
                        code = (int)w.CloseStatus.Value;
                        reason = w.CloseStatusDescription ?? "";
                    }
                }
                catch (Exception e) when (!(e is OutOfMemoryException))
                {
                    refused = opened ? null : e;
                }
                finally
                {
                    lock (mu)
                    {
                        if (ws == w) ws = null;
                        if (state == RealtimeState.Open) SetState(RealtimeState.Reconnecting);
                    }
                    w.Dispose();
                }
                if (life.IsCancellationRequested) break;
                if (refused != null)
                {
                    var why = await Probe(url).ConfigureAwait(false);
                    if (why != null)
                    {
                        Stop(-1, why.Message, why);
                        break;
                    }
                }
                if (code == 4000 || code == 4001 || code == 4003)
                {
                    var why = code == 4000 ? "the session ended: sign in again" : code == 4001 ? "kicked by an admin" : "banned";
                    Stop(code, why + (reason != "" ? " (" + reason + ")" : ""));
                    break;
                }
                lock (mu)
                {
                    urlIndex++;
                    if (state != RealtimeState.Connecting) SetState(RealtimeState.Reconnecting);
                }
                try
                {
                    await Task.Delay(o.Backoff.Delay(failures++), life.Token).ConfigureAwait(false);
                }
                catch (OperationCanceledException)
                {
                    break;
                }
            }
        }

        static readonly System.Net.Http.HttpClient probeClient = new System.Net.Http.HttpClient { Timeout = TimeSpan.FromSeconds(10) };

        // Probe asks why an open failed: a WebSocket client cannot see the
        // refusal's status or body, so the session is checked over HTTP
        // (GET /api/v1/settings with the token, on the same node). A 401
        // (bad_token: signed out, expired) or 403 (banned) ends the client
        // with the server's own error; anything else is retried.
        async Task<ChatdException> Probe(string wsUrl)
        {
            var u = "http" + wsUrl.Substring(2);
            if (u.EndsWith("/ws")) u = u.Substring(0, u.Length - 3);
            try
            {
                using (var req = new System.Net.Http.HttpRequestMessage(System.Net.Http.HttpMethod.Get, u + "/api/v1/settings"))
                {
                    req.Headers.TryAddWithoutValidation("Authorization", "Bearer " + (o.Token() ?? ""));
                    using (var res = await probeClient.SendAsync(req, life.Token).ConfigureAwait(false))
                    {
                        var status = (int)res.StatusCode;
                        if (status != 401 && status != 403) return null;
                        return ChatdException.FromBody(status, await res.Content.ReadAsStringAsync().ConfigureAwait(false), null);
                    }
                }
            }
            catch (Exception)
            {
                return null; // the node is unreachable: retried like the open
            }
        }

        async Task Receive(ClientWebSocket w, Action onHello)
        {
            var buf = new byte[16 * 1024];
            var msg = new MemoryStream();
            while (true)
            {
                var r = await w.ReceiveAsync(new ArraySegment<byte>(buf), life.Token).ConfigureAwait(false);
                if (r.MessageType == WebSocketMessageType.Close) return;
                msg.Write(buf, 0, r.Count);
                if (!r.EndOfMessage) continue;
                var text = Encoding.UTF8.GetString(msg.GetBuffer(), 0, (int)msg.Length);
                msg.SetLength(0);
                foreach (var line in text.Split('\n'))
                {
                    if (line.Trim() == "") continue;
                    Dictionary<string, object> ev;
                    try
                    {
                        ev = Json.Parse(line) as Dictionary<string, object>;
                    }
                    catch (FormatException)
                    {
                        continue;
                    }
                    if (ev == null) continue;
                    if (J.Str(ev, "type") == "hello")
                    {
                        onHello();
                        await OnHello(w, ev).ConfigureAwait(false);
                    }
                    else OnEvent(ev);
                }
            }
        }

        // OnHello resumes every room after its last delivered id, then
        // resends what is pending (joins, resumes, says, pings) in order:
        // the server takes a connection's frames in the order sent.
        async Task OnHello(ClientWebSocket w, Dictionary<string, object> ev)
        {
            User = J.Str(ev, "user");
            Node = J.Str(ev, "node");
            var frames = new List<Dictionary<string, object>>();
            List<Pending> lost;
            lock (mu)
            {
                foreach (var kv in rooms)
                {
                    var f = new Dictionary<string, object> { { "type", "resume" }, { "room", kv.Key } };
                    if (kv.Value != "") f["after"] = kv.Value;
                    frames.Add(f);
                }
                foreach (var p in joins) frames.Add(p.Frame);
                foreach (var p in says) frames.Add(p.Frame);
                foreach (var p in pings) frames.Add(p.Frame);
                // A queue or dequeue whose answer was lost is not resent (a
                // second ticket would be ticket_open): it fails, and the
                // caller reads the ticket.
                lost = new List<Pending>(queues.Values);
                queues.Clear();
                SetState(RealtimeState.Open);
            }
            foreach (var p in lost) Fail(p, new ChatdException(ClientCodes.Network, p.Kind + ": the connection dropped before the answer; read the ticket"));
            Raise(() => EventReceived?.Invoke(ev));
            firstOpen.TrySetResult(true);
            foreach (var f in frames)
            {
                try
                {
                    await SendOn(w, Encoding.UTF8.GetBytes(Json.Serialize(f))).ConfigureAwait(false);
                }
                catch (ChatdException)
                {
                    return; // the receive loop sees the drop
                }
            }
        }

        void OnEvent(Dictionary<string, object> ev)
        {
            var type = J.Str(ev, "type");
            var rf = J.Get(ev, "ref") as string;
            Raise(() => EventReceived?.Invoke(ev));
            switch (type)
            {
                case "joined":
                {
                    var room = Room.Read(J.Obj(J.Get(ev, "room")));
                    var done = new List<Pending>();
                    lock (mu)
                    {
                        if (!rooms.ContainsKey(room.Id)) rooms[room.Id] = "";
                        joins.RemoveAll(p =>
                        {
                            var hit = (p.Kind == "join" && p.Key == room.Lobby) || (p.Kind == "resume" && p.Key == room.Id);
                            if (hit) done.Add(p);
                            return hit;
                        });
                    }
                    foreach (var p in done) p.Tcs.TrySetResult(room);
                    Raise(() => Joined?.Invoke(room));
                    break;
                }
                case "message":
                {
                    var m = Message.Read(J.Obj(J.Get(ev, "message")));
                    lock (mu)
                    {
                        string last;
                        if (rooms.TryGetValue(m.Room, out last))
                        {
                            if (last != "" && CompareIds(m.Id, last) <= 0) return; // delivered already
                            rooms[m.Room] = m.Id;
                        }
                    }
                    Raise(() => MessageReceived?.Invoke(m));
                    break;
                }
                case "ack":
                {
                    Pending p = null;
                    lock (mu)
                    {
                        p = says.Find(x => x.Ref == rf);
                        if (p != null) says.Remove(p);
                    }
                    p?.Tcs.TrySetResult(J.Str(ev, "id"));
                    break;
                }
                case "queued":
                case "dequeued":
                {
                    Pending p;
                    lock (mu)
                    {
                        if (rf == null || !queues.TryGetValue(rf, out p)) p = null;
                        else queues.Remove(rf);
                    }
                    p?.Tcs.TrySetResult(Ticket.Read(J.Obj(J.Get(ev, "ticket"))));
                    break;
                }
                case "pong":
                {
                    Pending p = null;
                    lock (mu) if (pings.Count > 0) p = pings.Dequeue();
                    p?.Tcs.TrySetResult(true);
                    break;
                }
                case "left":
                {
                    var room = J.Str(ev, "room");
                    lock (mu) rooms.Remove(room);
                    Raise(() => Left?.Invoke(room));
                    break;
                }
                case "presence":
                {
                    var pe = new PresenceEvent { Room = J.Str(ev, "room"), User = J.Str(ev, "user"), State = J.Str(ev, "state") };
                    Raise(() => PresenceChanged?.Invoke(pe));
                    break;
                }
                case "matched":
                case "ticket_expired":
                {
                    var me = MatchEvent.Read(ev);
                    Raise(() => Matched?.Invoke(me));
                    break;
                }
                case "error":
                    OnError(ev, rf);
                    break;
            }
        }

        void OnError(Dictionary<string, object> ev, string rf)
        {
            var msg = J.Str(ev, "message");
            var room = J.Get(ev, "room") as string;
            var code = J.Str(ev, "code");
            var err = new ChatdException(code, msg, 0, code == ErrorCodes.RateLimited ? ChatdException.WaitFromMessage(msg) : null, rf, room);
            Pending p = null;
            if (rf != null)
            {
                lock (mu)
                {
                    p = joins.Find(x => x.Ref == rf) ?? says.Find(x => x.Ref == rf);
                    if (p == null && queues.TryGetValue(rf, out p)) queues.Remove(rf);
                    if (p != null)
                    {
                        joins.Remove(p);
                        says.Remove(p);
                    }
                }
            }
            if (code == ErrorCodes.NotSeated && room != null && p == null)
                lock (mu) rooms.Remove(room); // the seat lapsed
            if (p != null) p.Tcs.TrySetException(err);
            else Raise(() => Error?.Invoke(err));
        }
    }
}
