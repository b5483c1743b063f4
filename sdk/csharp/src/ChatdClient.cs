// ChatdClient: the HTTP API of docs/PROTOCOL.md ("HTTP API") for one user
// session, shaped like the JavaScript SDK's ChatdClient (sdk/js) and the
// Go client (client/).

using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;

namespace Chatd
{
    /// <summary>
    /// ChatdClient is the HTTP API for one user session, over one or more
    /// base URLs with failover. Every method throws ChatdException: the
    /// server's documented code and status, or a ClientCodes code. It is
    /// safe to use from several threads.
    /// </summary>
    public sealed class ChatdClient : IDisposable
    {
        readonly Http http;

        /// <summary>Token is the session's token: set by SignInAsync, cleared by SignOutAsync.</summary>
        public string Token { get; private set; }

        /// <summary>User is the session's user.</summary>
        public string User { get; private set; }

        /// <summary>ChatdClient makes a client of o; it throws ArgumentException without a well-formed http(s) base URL.</summary>
        public ChatdClient(ClientOptions o)
        {
            if (o == null) throw new ArgumentNullException(nameof(o));
            http = new Http(o);
            Token = o.Token;
            User = o.User;
        }

        /// <summary>ChatdClient makes a client of the base URLs with the default options.</summary>
        public ChatdClient(params string[] baseUrls) : this(new ClientOptions { BaseUrls = baseUrls }) { }

        /// <summary>BaseUrl is the base URL requests go to now (it moves on failover).</summary>
        public string BaseUrl => http.BaseUrl;

        /// <summary>BaseUrls are every base URL, in failover order.</summary>
        public IReadOnlyList<string> BaseUrls => http.BaseUrls;

        /// <summary>Dispose releases the HttpClient if the client made it.</summary>
        public void Dispose()
        {
            http.Dispose();
        }

        /// <summary>UseToken makes the client act as an existing session.</summary>
        public void UseToken(string token, string user = null)
        {
            Token = token;
            User = user;
        }

        /// <summary>
        /// RequestAsync calls any operation of /api/v1 this client has no
        /// method for (the admin endpoints, say) and returns the decoded
        /// answer. It is not retried unless o.Retry says it is safe to repeat.
        /// </summary>
        public Task<Dictionary<string, object>> RequestAsync(string method, string path, RequestOptions o = null, CancellationToken ct = default(CancellationToken))
            => http.Request(method, path, o, Token, ct);

        // ---- sessions ----

        /// <summary>
        /// SignInAsync signs in as the guest user (name_taken while another
        /// guest holds the name; pass token, a live token of the guest that
        /// holds it, to open a second session of that guest). Not retried: a
        /// repeated sign-in would meet its own claim. The client keeps the token.
        /// </summary>
        public async Task<Session> SignInAsync(string user, string token = null, CancellationToken ct = default(CancellationToken))
        {
            var r = await http.Request("POST", "/session", new RequestOptions
            {
                Body = new Dictionary<string, object> { { "user", user } }, Token = token ?? "",
            }, null, ct).ConfigureAwait(false);
            var s = Session.Read(r);
            Token = s.Token;
            User = s.User;
            return s;
        }

        /// <summary>SignOutAsync ends the session: the name is free at once and the guest's WebSockets close with 4000.</summary>
        public async Task SignOutAsync(CancellationToken ct = default(CancellationToken))
        {
            await http.Request("DELETE", "/session", null, Token, ct).ConfigureAwait(false);
            Token = null;
        }

        // ---- lobbies and rooms ----

        static RequestOptions Read(IDictionary<string, object> q = null) => new RequestOptions { Retry = true, Query = q };

        /// <summary>LobbiesAsync lists lobbies, most users online first (limit 1–500, default 50).</summary>
        public async Task<List<LobbySummary>> LobbiesAsync(int? limit = null, CancellationToken ct = default(CancellationToken))
        {
            var r = await http.Request("GET", "/lobbies", Read(new Dictionary<string, object> { { "limit", limit } }), Token, ct).ConfigureAwait(false);
            return J.Map(r, "lobbies", LobbySummary.Read);
        }

        /// <summary>RoomsAsync lists a lobby's rooms by number (none for an unknown lobby).</summary>
        public async Task<List<Room>> RoomsAsync(string lobby, CancellationToken ct = default(CancellationToken))
        {
            var r = await http.Request("GET", "/lobbies/" + Http.Seg(lobby) + "/rooms", Read(), Token, ct).ConfigureAwait(false);
            return J.Map(r, "rooms", Room.Read);
        }

        /// <summary>RoomAsync reads one room (unknown_room, bad_name).</summary>
        public async Task<Room> RoomAsync(string room, CancellationToken ct = default(CancellationToken))
        {
            var r = await http.Request("GET", "/rooms/" + Http.Seg(room), Read(), Token, ct).ConfigureAwait(false);
            return Room.Read(J.Obj(J.Get(r, "room")));
        }

        /// <summary>JoinAsync takes a seat in the lobby (the same room when seated already); the session's "messages" poll section carries the room from now on.</summary>
        public async Task<Room> JoinAsync(string lobby, CancellationToken ct = default(CancellationToken))
        {
            var r = await http.Request("POST", "/lobbies/" + Http.Seg(lobby) + "/join", Read(), Token, ct).ConfigureAwait(false);
            return Room.Read(J.Obj(J.Get(r, "room")));
        }

        /// <summary>JoinRoomAsync takes the seat in a room by id: a match's room, or a room whose seat lapsed (forbidden, unknown_room, room_full, seated_elsewhere).</summary>
        public async Task<Room> JoinRoomAsync(string room, CancellationToken ct = default(CancellationToken))
        {
            var r = await http.Request("POST", "/rooms/" + Http.Seg(room) + "/join", Read(), Token, ct).ConfigureAwait(false);
            return Room.Read(J.Obj(J.Get(r, "room")));
        }

        /// <summary>LeaveAsync frees the seat, for every connection and session of the user.</summary>
        public Task LeaveAsync(string room, CancellationToken ct = default(CancellationToken))
            => http.Request("POST", "/rooms/" + Http.Seg(room) + "/leave", Read(), Token, ct);

        // ---- messages ----

        /// <summary>
        /// PostMessageAsync sends a chat message to a room the user is seated
        /// in, with an Idempotency-Key (new per call unless given) that its
        /// retries reuse: however often the answer is lost, one message is
        /// stored. not_seated, muted, too_long, rate_limited, unknown_room.
        /// </summary>
        public async Task<Message> PostMessageAsync(string room, string text, string idempotencyKey = null, CancellationToken ct = default(CancellationToken))
        {
            var r = await http.Request("POST", "/rooms/" + Http.Seg(room) + "/messages", new RequestOptions
            {
                Body = new Dictionary<string, object> { { "text", text } }, IdempotencyKey = idempotencyKey ?? Http.NewKey(), Retry = true,
            }, Token, ct).ConfigureAwait(false);
            return Message.Read(J.Obj(J.Get(r, "message")));
        }

        /// <summary>HistoryAsync reads a room's messages, oldest first: the latest limit, or those after the id after (resume_gap when it is gone).</summary>
        public async Task<List<Message>> HistoryAsync(string room, string after = null, int? limit = null, CancellationToken ct = default(CancellationToken))
        {
            var r = await http.Request("GET", "/rooms/" + Http.Seg(room) + "/messages",
                Read(new Dictionary<string, object> { { "after", after }, { "limit", limit } }), Token, ct).ConfigureAwait(false);
            return J.Map(r, "messages", Message.Read);
        }

        /// <summary>MarkReadAsync sets the user's read mark of a room to the message id (it never moves backwards).</summary>
        public Task MarkReadAsync(string room, string id, CancellationToken ct = default(CancellationToken))
        {
            var o = Read();
            o.Body = new Dictionary<string, object> { { "id", id } };
            return http.Request("POST", "/rooms/" + Http.Seg(room) + "/read", o, Token, ct);
        }

        // ---- leaderboards ----

        /// <summary>LeaderboardTopAsync reads a board's best entries, best first (limit 1–1000, default 100).</summary>
        public async Task<List<Entry>> LeaderboardTopAsync(string board, int? limit = null, CancellationToken ct = default(CancellationToken))
        {
            var r = await http.Request("GET", "/leaderboards/" + Http.Seg(board) + "/top", Read(new Dictionary<string, object> { { "limit", limit } }), Token, ct).ConfigureAwait(false);
            return J.Map(r, "entries", Entry.Read);
        }

        /// <summary>LeaderboardPlayerAsync reads one player's entry (unknown_player when none).</summary>
        public async Task<Entry> LeaderboardPlayerAsync(string board, string player, CancellationToken ct = default(CancellationToken))
        {
            var r = await http.Request("GET", "/leaderboards/" + Http.Seg(board) + "/players/" + Http.Seg(player), Read(), Token, ct).ConfigureAwait(false);
            return Entry.Read(J.Obj(J.Get(r, "entry")));
        }

        /// <summary>LeaderboardAroundAsync reads up to radius entries above and below a player (unknown_player).</summary>
        public async Task<List<Entry>> LeaderboardAroundAsync(string board, string player, int? radius = null, CancellationToken ct = default(CancellationToken))
        {
            var r = await http.Request("GET", "/leaderboards/" + Http.Seg(board) + "/around/" + Http.Seg(player),
                Read(new Dictionary<string, object> { { "radius", radius } }), Token, ct).ConfigureAwait(false);
            return J.Map(r, "entries", Entry.Read);
        }

        /// <summary>
        /// PostScoreAsync posts a player's score (mode "best" keeps the
        /// better, "incr" adds, "set" replaces; null is best) with an
        /// Idempotency-Key its retries reuse. bad_value, board_full, rate_limited.
        /// </summary>
        public async Task<Entry> PostScoreAsync(string board, string player, double score, string mode = null, string idempotencyKey = null, CancellationToken ct = default(CancellationToken))
        {
            var body = new Dictionary<string, object> { { "player", player }, { "score", score } };
            if (mode != null) body["mode"] = mode;
            var r = await http.Request("POST", "/leaderboards/" + Http.Seg(board) + "/scores", new RequestOptions
            {
                Body = body, IdempotencyKey = idempotencyKey ?? Http.NewKey(), Retry = true,
            }, Token, ct).ConfigureAwait(false);
            return Entry.Read(J.Obj(J.Get(r, "entry")));
        }

        // ---- shop and wallet ----

        /// <summary>ShopItemsAsync lists the shop's items by name.</summary>
        public async Task<List<Item>> ShopItemsAsync(CancellationToken ct = default(CancellationToken))
        {
            var r = await http.Request("GET", "/shop/items", Read(), Token, ct).ConfigureAwait(false);
            return J.Map(r, "items", Item.Read);
        }

        /// <summary>
        /// BuyAsync buys qty (1–10^6) of an item with an Idempotency-Key (new
        /// per call unless given, reused by its retries): it buys once, and a
        /// retry gets the first answer. unknown_item, sold_out, insufficient_funds, conflict.
        /// </summary>
        public async Task<Wallet> BuyAsync(string item, long qty = 1, string idempotencyKey = null, CancellationToken ct = default(CancellationToken))
        {
            var r = await http.Request("POST", "/shop/buy", new RequestOptions
            {
                Body = new Dictionary<string, object> { { "item", item }, { "qty", qty } }, IdempotencyKey = idempotencyKey ?? Http.NewKey(), Retry = true,
            }, Token, ct).ConfigureAwait(false);
            return Wallet.Read(r);
        }

        /// <summary>WalletAsync reads the user's balance and items.</summary>
        public async Task<Wallet> WalletAsync(CancellationToken ct = default(CancellationToken))
            => Wallet.Read(await http.Request("GET", "/wallet", Read(), Token, ct).ConfigureAwait(false));

        // ---- matchmaking ----

        /// <summary>
        /// SubmitTicketAsync submits a matchmaking ticket to queue: waiting,
        /// or matched already. attributes (equal for tickets to match) are
        /// optional; a non-empty party is refused consent_required (a party
        /// is formed by invitation: POST /matchmaking/{queue}/parties, and
        /// queues once every member accepts). unknown_queue, ticket_open,
        /// consent_required, bad_value. Not retried: a repeat is ticket_open.
        /// </summary>
        public async Task<Ticket> SubmitTicketAsync(string queue, double skill, IList<string> party = null, IDictionary<string, string> attributes = null, CancellationToken ct = default(CancellationToken))
        {
            var body = new Dictionary<string, object> { { "skill", skill } };
            if (party != null) body["party"] = party;
            if (attributes != null)
            {
                var a = new Dictionary<string, object>();
                foreach (var kv in attributes) a[kv.Key] = kv.Value;
                body["attributes"] = a;
            }
            var r = await http.Request("POST", "/matchmaking/" + Http.Seg(queue) + "/tickets", new RequestOptions { Body = body }, Token, ct).ConfigureAwait(false);
            return Ticket.Read(J.Obj(J.Get(r, "ticket")));
        }

        /// <summary>TicketAsync reads a ticket of the user (unknown_ticket).</summary>
        public async Task<Ticket> TicketAsync(string queue, string id, CancellationToken ct = default(CancellationToken))
        {
            var r = await http.Request("GET", "/matchmaking/" + Http.Seg(queue) + "/tickets/" + Http.Seg(id), Read(), Token, ct).ConfigureAwait(false);
            return Ticket.Read(J.Obj(J.Get(r, "ticket")));
        }

        /// <summary>CancelTicketAsync cancels a ticket and returns it as it ended (unknown_ticket).</summary>
        public async Task<Ticket> CancelTicketAsync(string queue, string id, CancellationToken ct = default(CancellationToken))
        {
            var r = await http.Request("DELETE", "/matchmaking/" + Http.Seg(queue) + "/tickets/" + Http.Seg(id), Read(), Token, ct).ConfigureAwait(false);
            return Ticket.Read(J.Obj(J.Get(r, "ticket")));
        }

        // ---- polling ----

        /// <summary>
        /// PollAsync reads and clears the session's dirty sections once and
        /// returns each one's data; waitSeconds (0–30) parks a clean poll
        /// until something changes. Not retried: a poll clears what it answers.
        /// </summary>
        public async Task<PollAnswer> PollAsync(int waitSeconds = 0, CancellationToken ct = default(CancellationToken))
        {
            var r = await http.Request("GET", "/poll", new RequestOptions
            {
                Query = new Dictionary<string, object> { { "wait", waitSeconds > 0 ? (object)waitSeconds : null } },
                ExtraTimeout = TimeSpan.FromSeconds(waitSeconds),
            }, Token, ct).ConfigureAwait(false);
            return PollAnswer.Read(r);
        }

        /// <summary>
        /// PollLoopAsync long-polls (waitSeconds, default 25) until ct fires,
        /// handing every answer that has dirty sections to onAnswer (on the
        /// loop's thread). Network failures, 5xx and 429 are retried with
        /// backoff (at least the Retry-After; onError is told of each); any
        /// other error (bad_token, banned …) ends the loop by throwing.
        /// Cancelling ct ends it without an error.
        /// </summary>
        public async Task PollLoopAsync(Action<PollAnswer> onAnswer, CancellationToken ct, int waitSeconds = 25, Action<ChatdException> onError = null, Backoff backoff = null)
        {
            if (onAnswer == null) throw new ArgumentNullException(nameof(onAnswer));
            backoff = backoff ?? new Backoff(TimeSpan.FromMilliseconds(500), TimeSpan.FromSeconds(30));
            var failures = 0;
            while (!ct.IsCancellationRequested)
            {
                PollAnswer ans;
                try
                {
                    ans = await PollAsync(waitSeconds, ct).ConfigureAwait(false);
                }
                catch (ChatdException e)
                {
                    if (e.Code == ClientCodes.Aborted) return;
                    if (!e.Retryable) throw;
                    var delay = backoff.Delay(failures++);
                    if (e.RetryAfter.HasValue && e.RetryAfter.Value > delay) delay = e.RetryAfter.Value;
                    onError?.Invoke(e);
                    if (!await Sleep(delay, ct).ConfigureAwait(false)) return;
                    continue;
                }
                failures = 0;
                if (ans.Dirty.Count > 0) onAnswer(ans);
                if (waitSeconds == 0 && !await Sleep(TimeSpan.FromSeconds(1), ct).ConfigureAwait(false)) return;
            }
        }

        static async Task<bool> Sleep(TimeSpan d, CancellationToken ct)
        {
            try
            {
                await Task.Delay(d, ct).ConfigureAwait(false);
                return true;
            }
            catch (OperationCanceledException)
            {
                return false;
            }
        }

        // ---- realtime ----

        /// <summary>
        /// Realtime makes a RealtimeClient for this session: the WebSocket
        /// at /ws of every base URL (in the same failover order), with this
        /// client's token. o may set the rest of RealtimeOptions.
        /// </summary>
        public RealtimeClient Realtime(RealtimeOptions o = null)
        {
            o = o ?? new RealtimeOptions();
            if (o.Urls == null || o.Urls.Count == 0)
            {
                var ws = new List<string>();
                foreach (var u in http.BaseUrls) ws.Add("ws" + u.Substring(4) + "/ws");
                o.Urls = ws;
            }
            if (o.Token == null) o.Token = () => Token ?? "";
            return new RealtimeClient(o);
        }
    }
}
