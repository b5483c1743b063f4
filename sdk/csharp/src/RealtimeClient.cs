// RealtimeClient: the WebSocket of docs/PROTOCOL.md ("WebSocket") with
// reconnect, failover over several URLs and resume: after a drop it opens
// the next URL, resumes every room after the last message id it delivered
// (so nothing is lost), drops what it delivered already (so nothing comes
// twice), and resends every say not yet acknowledged with its ref (so the
// server stores it once).

using System;
using System.Collections.Generic;
using System.IO;
using System.Net.WebSockets;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Chatd
{
    /// <summary>RealtimeOptions configure a RealtimeClient; ChatdClient.Realtime fills Urls and Token.</summary>
    public sealed class RealtimeOptions
    {
        /// <summary>Urls are the WebSocket URLs (ws://host/ws), tried in order: a drop moves to the next.</summary>
        public IList<string> Urls;
        /// <summary>Token gives the session token at each (re)connect.</summary>
        public Func<string> Token;
        /// <summary>Backoff is the wait between reconnects (default base 500 ms, max 10 s; the first try after a drop waits too).</summary>
        public Backoff Backoff = new Backoff(TimeSpan.FromMilliseconds(500), TimeSpan.FromSeconds(10));
        /// <summary>
        /// Context, when set, is where events are raised (Unity: capture
        /// SynchronizationContext.Current on the main thread). Null raises
        /// them on the client's receive thread, one at a time, in order.
        /// </summary>
        public SynchronizationContext Context;
        /// <summary>CallTimeout bounds JoinAsync, EnterAsync, QueueAsync and PingAsync (default 30 s); SayAsync waits across reconnects until Close.</summary>
        public TimeSpan CallTimeout = TimeSpan.FromSeconds(30);
    }

    /// <summary>RealtimeState is where a RealtimeClient is in its life.</summary>
    public enum RealtimeState
    {
        /// <summary>Connecting: the first open is under way.</summary>
        Connecting,
        /// <summary>Open: connected, hello received.</summary>
        Open,
        /// <summary>Reconnecting: the connection dropped; the client opens another.</summary>
        Reconnecting,
        /// <summary>Closed: for good (Close, signed out, banned, kicked).</summary>
        Closed,
    }

    /// <summary>PresenceEvent is a presence change in a room the client is in.</summary>
    public sealed class PresenceEvent
    {
        /// <summary>Room is the room's id.</summary>
        public string Room;
        /// <summary>User is who joined or left.</summary>
        public string User;
        /// <summary>State is "joined" or "left".</summary>
        public string State;
    }

    /// <summary>
    /// RealtimeClient is one user's WebSocket session. Its calls are safe
    /// from any thread; its events are raised in order, on Options.Context
    /// when set. Calls throw (fault with) ChatdException.
    /// </summary>
    public sealed partial class RealtimeClient : IDisposable
    {
        const int MaxFrame = 64 * 1024;

        readonly RealtimeOptions o;
        readonly object mu = new object();
        readonly CancellationTokenSource life = new CancellationTokenSource();
        // rooms maps each room the client is in to the id of the last
        // message it delivered ("" before the first).
        readonly Dictionary<string, string> rooms = new Dictionary<string, string>();
        readonly List<Pending> joins = new List<Pending>();
        readonly List<Pending> says = new List<Pending>();
        readonly Dictionary<string, Pending> queues = new Dictionary<string, Pending>();
        readonly Queue<Pending> pings = new Queue<Pending>();
        readonly SemaphoreSlim sendLock = new SemaphoreSlim(1, 1);
        ClientWebSocket ws;
        int urlIndex;
        int refSeq;
        Task loop;
        TaskCompletionSource<bool> firstOpen;
        RealtimeState state = RealtimeState.Connecting;

        sealed class Pending
        {
            public string Ref, Kind, Key; // Key: the lobby or room a join or resume waits for
            public Dictionary<string, object> Frame;
            public TaskCompletionSource<object> Tcs = new TaskCompletionSource<object>(TaskCreationOptions.RunContinuationsAsynchronously);
        }

        /// <summary>MessageReceived is raised for each message of a room, once, in id order, with no gap across reconnects.</summary>
        public event Action<Message> MessageReceived;
        /// <summary>Joined is raised after a join or resume (also after each reconnect's resume).</summary>
        public event Action<Room> Joined;
        /// <summary>Left is raised when the user left a room from another connection or over REST.</summary>
        public event Action<string> Left;
        /// <summary>PresenceChanged is raised when someone takes or leaves a seat in a room of the client.</summary>
        public event Action<PresenceEvent> PresenceChanged;
        /// <summary>Matched is raised for a "matched" or "ticket_expired" event of the user's tickets.</summary>
        public event Action<MatchEvent> Matched;
        /// <summary>Error is raised for an error event no call waits for (a seat lost by lease: not_seated with its Room; resume_gap).</summary>
        public event Action<ChatdException> Error;
        /// <summary>StateChanged is raised on each state change.</summary>
        public event Action<RealtimeState> StateChanged;
        /// <summary>EventReceived is raised for every server event, parsed, before the typed events (typing, notice, settings …).</summary>
        public event Action<Dictionary<string, object>> EventReceived;
        /// <summary>ClosedForGood is raised once with the close code and reason that ended the client (0 for Close).</summary>
        public event Action<int, string> ClosedForGood;

        /// <summary>RealtimeClient makes a client; ConnectAsync opens it. It throws ArgumentException without ws(s) URLs or a Token.</summary>
        public RealtimeClient(RealtimeOptions o)
        {
            this.o = o ?? throw new ArgumentNullException(nameof(o));
            if (o.Urls == null || o.Urls.Count == 0) throw new ArgumentException("RealtimeOptions.Urls needs at least one ws:// or wss:// URL");
            foreach (var u in o.Urls)
                if (!u.StartsWith("ws://") && !u.StartsWith("wss://")) throw new ArgumentException("not a ws(s) URL: " + u);
            if (o.Token == null) throw new ArgumentException("RealtimeOptions.Token is required");
        }

        /// <summary>State is the client's state now.</summary>
        public RealtimeState State { get { lock (mu) return state; } }

        /// <summary>Url is the URL the client uses now (it moves on each drop).</summary>
        public string Url { get { lock (mu) return o.Urls[urlIndex % o.Urls.Count]; } }

        /// <summary>User and Node are the hello's, of the current connection.</summary>
        public string User { get; private set; }

        /// <summary>Node is the id of the node of the current connection.</summary>
        public string Node { get; private set; }

        /// <summary>LastMessageId is the id of the last message delivered of room ("" for none, null when not in it).</summary>
        public string LastMessageId(string room)
        {
            lock (mu)
            {
                string id;
                return rooms.TryGetValue(room, out id) ? id : null;
            }
        }

        /// <summary>
        /// ConnectAsync opens the WebSocket and returns once the server said
        /// hello; a connection that fails is retried over the URLs until ct
        /// fires (aborted) or the server refuses the session for good
        /// (bad_token, banned, forbidden).
        /// </summary>
        public async Task ConnectAsync(CancellationToken ct = default(CancellationToken))
        {
            lock (mu)
            {
                if (state == RealtimeState.Closed) throw Closed("the client is closed");
                if (loop == null)
                {
                    firstOpen = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                    loop = Task.Run(Run);
                }
            }
            // A cancelled wait ends this call only: the client goes on
            // connecting, and a later ConnectAsync waits for the same open.
            var cancelled = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
            using (ct.Register(() => cancelled.TrySetResult(true)))
            {
                var done = await Task.WhenAny(firstOpen.Task, cancelled.Task).ConfigureAwait(false);
                if (done != firstOpen.Task) throw new ChatdException(ClientCodes.Aborted, "the call was cancelled");
                await firstOpen.Task.ConfigureAwait(false);
            }
        }

        /// <summary>ReconnectNow drops the connection (after a network change, say): the client reconnects and resumes as after any drop.</summary>
        public void ReconnectNow()
        {
            ClientWebSocket w;
            lock (mu) w = ws;
            w?.Abort();
        }

        /// <summary>Close ends the client for good: pending calls fail with closed.</summary>
        public void Close()
        {
            Stop(0, "closed by the client");
        }

        /// <summary>Dispose is Close.</summary>
        public void Dispose() => Close();

        // ---- calls ----

        /// <summary>JoinAsync takes a seat in the lobby and returns its room; its messages follow as MessageReceived.</summary>
        public async Task<Room> JoinAsync(string lobby, CancellationToken ct = default(CancellationToken))
        {
            var p = NewPending("join", lobby, new Dictionary<string, object> { { "type", "join" }, { "lobby", lobby } });
            lock (mu) joins.Add(p);
            return (Room)await Call(p, ct).ConfigureAwait(false);
        }

        /// <summary>EnterAsync takes the seat in a room by id (a match's room, or back after a lapse) with a resume frame; forbidden, room_full, seated_elsewhere.</summary>
        public async Task<Room> EnterAsync(string room, CancellationToken ct = default(CancellationToken))
        {
            var f = new Dictionary<string, object> { { "type", "resume" }, { "room", room } };
            lock (mu)
            {
                string last;
                if (rooms.TryGetValue(room, out last) && last != "") f["after"] = last;
            }
            var p = NewPending("resume", room, f);
            lock (mu) joins.Add(p);
            return (Room)await Call(p, ct).ConfigureAwait(false);
        }

        /// <summary>
        /// SayAsync sends text to a room and returns the stored message's id
        /// (the ack). An unacknowledged say is resent with its ref after a
        /// reconnect, so it is stored once; it fails only on an error event
        /// (not_seated, muted, too_long, rate_limited …) or Close.
        /// </summary>
        public async Task<string> SayAsync(string room, string text, CancellationToken ct = default(CancellationToken))
        {
            var p = NewPending("say", room, new Dictionary<string, object> { { "type", "say" }, { "room", room }, { "text", text } });
            lock (mu) says.Add(p);
            return (string)await Call(p, ct, TimeSpan.Zero).ConfigureAwait(false);
        }

        /// <summary>LeaveAsync frees the seat in room and stops its events (for all the user's connections).</summary>
        public async Task LeaveAsync(string room)
        {
            lock (mu) rooms.Remove(room);
            await Send(new Dictionary<string, object> { { "type", "leave" }, { "room", room } }).ConfigureAwait(false);
        }

        /// <summary>ReadAsync marks room read up to the message id.</summary>
        public Task ReadAsync(string room, string id) => Send(new Dictionary<string, object> { { "type", "read" }, { "room", room }, { "id", id } });

        /// <summary>TypingAsync tells the room's other members the user is typing.</summary>
        public Task TypingAsync(string room) => Send(new Dictionary<string, object> { { "type", "typing" }, { "room", room } });

        /// <summary>QueueAsync submits a matchmaking ticket (the queued answer); the match comes as Matched. unknown_queue, ticket_open, conflict.</summary>
        public async Task<Ticket> QueueAsync(string queue, double skill, IList<string> party = null, IDictionary<string, string> attributes = null, CancellationToken ct = default(CancellationToken))
        {
            var f = new Dictionary<string, object> { { "type", "queue" }, { "queue", queue }, { "skill", skill } };
            if (party != null) f["party"] = party;
            if (attributes != null)
            {
                var a = new Dictionary<string, object>();
                foreach (var kv in attributes) a[kv.Key] = kv.Value;
                f["attributes"] = a;
            }
            var p = NewPending("queue", queue, f);
            lock (mu) queues[p.Ref] = p;
            return (Ticket)await Call(p, ct).ConfigureAwait(false);
        }

        /// <summary>DequeueAsync cancels a ticket and returns it as it ended.</summary>
        public async Task<Ticket> DequeueAsync(string queue, string ticket, CancellationToken ct = default(CancellationToken))
        {
            var p = NewPending("dequeue", queue, new Dictionary<string, object> { { "type", "dequeue" }, { "queue", queue }, { "ticket", ticket } });
            lock (mu) queues[p.Ref] = p;
            return (Ticket)await Call(p, ct).ConfigureAwait(false);
        }

        /// <summary>PingAsync sends a ping and waits for the pong.</summary>
        public async Task PingAsync(CancellationToken ct = default(CancellationToken))
        {
            var p = NewPending("ping", null, new Dictionary<string, object> { { "type", "ping" } });
            lock (mu) pings.Enqueue(p);
            await Call(p, ct).ConfigureAwait(false);
        }

        Pending NewPending(string kind, string key, Dictionary<string, object> frame)
        {
            var r = kind[0] + "-" + Interlocked.Increment(ref refSeq);
            frame["ref"] = r;
            return new Pending { Ref = r, Kind = kind, Key = key, Frame = frame };
        }

        async Task<object> Call(Pending p, CancellationToken ct, TimeSpan? timeout = null)
        {
            lock (mu)
            {
                if (state == RealtimeState.Closed)
                {
                    joins.Remove(p);
                    says.Remove(p);
                    queues.Remove(p.Ref);
                    throw Closed("the client is closed");
                }
            }
            var t = timeout ?? o.CallTimeout;
            using (var cts = CancellationTokenSource.CreateLinkedTokenSource(ct))
            {
                if (t > TimeSpan.Zero) cts.CancelAfter(t);
                using (cts.Token.Register(() =>
                {
                    Forget(p);
                    Fail(p, ct.IsCancellationRequested
                        ? new ChatdException(ClientCodes.Aborted, "the call was cancelled")
                        : new ChatdException(ClientCodes.Network, p.Kind + ": no answer within " + t.TotalSeconds + " s"));
                }))
                {
                    // Sent now if open; a frame that cannot be sent now is
                    // sent by the next connection's replay of what is pending.
                    try
                    {
                        await Send(p.Frame).ConfigureAwait(false);
                    }
                    catch (ChatdException e) when (e.Code == ClientCodes.FrameTooLarge)
                    {
                        Forget(p);
                        throw;
                    }
                    catch (ChatdException)
                    {
                    }
                    return await p.Tcs.Task.ConfigureAwait(false);
                }
            }
        }

        void Forget(Pending p)
        {
            lock (mu)
            {
                joins.Remove(p);
                says.Remove(p);
                queues.Remove(p.Ref);
            }
        }

        static void Fail(Pending p, ChatdException e) => p.Tcs.TrySetException(e);

        static ChatdException Closed(string why) => new ChatdException(ClientCodes.Closed, why);

        async Task Send(Dictionary<string, object> frame)
        {
            var bytes = Encoding.UTF8.GetBytes(Json.Serialize(frame));
            if (bytes.Length > MaxFrame) throw new ChatdException(ClientCodes.FrameTooLarge, "a frame of " + bytes.Length + " bytes is over the server's 64 KiB limit");
            ClientWebSocket w;
            lock (mu) w = state == RealtimeState.Open ? ws : null;
            if (w == null) throw new ChatdException(ClientCodes.Network, "not connected");
            await SendOn(w, bytes).ConfigureAwait(false);
        }

        async Task SendOn(ClientWebSocket w, byte[] bytes)
        {
            await sendLock.WaitAsync().ConfigureAwait(false);
            try
            {
                await w.SendAsync(new ArraySegment<byte>(bytes), WebSocketMessageType.Text, true, life.Token).ConfigureAwait(false);
            }
            catch (Exception e) when (e is WebSocketException || e is ObjectDisposedException || e is OperationCanceledException || e is IOException || e is InvalidOperationException)
            {
                throw new ChatdException(ClientCodes.Network, "send failed: " + e.Message, inner: e);
            }
            finally
            {
                sendLock.Release();
            }
        }

        // CompareIds orders message ids "ms-seq", padded or not.
        internal static int CompareIds(string a, string b)
        {
            long am, asq, bm, bsq;
            if (!SplitId(a, out am, out asq) || !SplitId(b, out bm, out bsq)) return string.CompareOrdinal(a, b);
            return am != bm ? am.CompareTo(bm) : asq.CompareTo(bsq);
        }

        static bool SplitId(string id, out long ms, out long seq)
        {
            ms = seq = 0;
            var i = id.IndexOf('-');
            return i > 0 && long.TryParse(id.Substring(0, i), out ms) && long.TryParse(id.Substring(i + 1), out seq);
        }

        void SetState(RealtimeState s)
        {
            // called under mu
            if (state == s || state == RealtimeState.Closed) return;
            state = s;
            Raise(() => StateChanged?.Invoke(s));
        }

        void Stop(int code, string why, ChatdException err = null)
        {
            var all = new List<Pending>();
            ClientWebSocket w;
            lock (mu)
            {
                if (state == RealtimeState.Closed) return;
                SetState(RealtimeState.Closed);
                state = RealtimeState.Closed;
                all.AddRange(joins);
                all.AddRange(says);
                all.AddRange(queues.Values);
                all.AddRange(pings);
                joins.Clear();
                says.Clear();
                queues.Clear();
                pings.Clear();
                w = ws;
            }
            var e = err ?? Closed(why);
            foreach (var p in all) Fail(p, e);
            firstOpen?.TrySetException(e);
            life.Cancel();
            w?.Abort();
            Raise(() => ClosedForGood?.Invoke(code, why));
        }

        void Raise(Action a)
        {
            if (o.Context != null) o.Context.Post(_ => a(), null);
            else a();
        }
    }
}
