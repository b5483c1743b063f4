// The C# SDK's tests: unit tests of the JSON reader and writer and of the
// error shape, then scenarios against real chatd nodes. TestCSharpSDK
// (csharp_test.go) builds this with mcs and runs it under mono with the
// nodes' URLs in CHATD_URLS (comma-separated) and the admin token in
// CHATD_ADMIN_TOKEN; for the fault scenario it prints "KILL <i>" and
// waits for "KILLED" on stdin once node i is SIGKILLed.
// Exit status 0 only when every test passed.

using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;
using Chatd;

static class Tests
{
    static string[] urls;
    static string admin;
    static readonly string run = Guid.NewGuid().ToString("N").Substring(0, 8);
    static int failed;

    static int Main(string[] args)
    {
        urls = (Environment.GetEnvironmentVariable("CHATD_URLS") ?? "").Split(new[] { ',' }, StringSplitOptions.RemoveEmptyEntries);
        admin = Environment.GetEnvironmentVariable("CHATD_ADMIN_TOKEN") ?? "";
        Test("json round trip", JsonRoundTrip);
        Test("json refuses bad input", JsonRefusesBadInput);
        Test("error shape and retryable", ErrorShape);
        Test("message ids order padded or raw", MessageIdOrder);
        if (urls.Length < 2)
        {
            Console.WriteLine("FAIL setup: CHATD_URLS must name two nodes");
            return 1;
        }
        Test("sign in, name taken, sign out ends the token", Sessions);
        Test("a dead base URL fails over to the next", Failover);
        Test("say on one node is received on the other", CrossNodeChat);
        Test("poll shows dirty sections; message key and purchase key apply once", PollAndIdempotency);
        Test("leaderboard post shows on the board and in the poll", Leaderboard);
        Test("matchmaking tickets over the WebSocket and REST are matched", Matchmaking);
        Test("sign-out closes the WebSocket with 4000 for good; a bad token is refused", ClosedForGood);
        Test("events are raised on the given SynchronizationContext", EventsOnContext);
        Test("a killed node: reconnect to the other and resume with no loss or duplicate", KillAndResume);
        Console.WriteLine(failed == 0 ? "PASS" : "FAIL " + failed + " test(s)");
        return failed == 0 ? 0 : 1;
    }

    static void Test(string name, Func<Task> f)
    {
        var only = Environment.GetEnvironmentVariable("CHATD_TEST_RUN");
        if (!string.IsNullOrEmpty(only) && !name.Contains(only)) return;
        var sw = Stopwatch.StartNew();
        try
        {
            if (!f().Wait(TimeSpan.FromSeconds(120))) throw new Exception("timed out after 120 s");
            Console.WriteLine("ok   " + name + " (" + sw.ElapsedMilliseconds + " ms)");
        }
        catch (Exception e)
        {
            failed++;
            var inner = e is AggregateException a && a.InnerExceptions.Count == 1 ? a.InnerException : e;
            Console.WriteLine("FAIL " + name + ": " + inner);
        }
    }

    static void Check(bool ok, string what)
    {
        if (!ok) throw new Exception("check failed: " + what);
    }

    static void Eq<T>(T want, T got, string what)
    {
        if (!EqualityComparer<T>.Default.Equals(want, got)) throw new Exception(what + ": want " + want + ", got " + got);
    }

    static async Task<ChatdException> Throws(Func<Task> f)
    {
        try
        {
            await f();
        }
        catch (ChatdException e)
        {
            return e;
        }
        throw new Exception("no ChatdException");
    }

    // Until waits for cond with a generous deadline; never a fixed sleep as an assertion.
    static async Task Until(Func<bool> cond, string what, int seconds = 30)
    {
        var sw = Stopwatch.StartNew();
        while (!cond())
        {
            if (sw.Elapsed > TimeSpan.FromSeconds(seconds)) throw new Exception("timed out after " + seconds + " s waiting for " + what);
            await Task.Delay(20);
        }
    }

    static string Name(string p) => p + "-" + run;

    static async Task<ChatdClient> User(string name, params string[] baseUrls)
    {
        var c = new ChatdClient(baseUrls.Length > 0 ? baseUrls : urls);
        await c.SignInAsync(Name(name));
        return c;
    }

    static ChatdClient Admin() => new ChatdClient(new ClientOptions { BaseUrls = urls, Token = admin });

    // ---- unit tests ----

    static Task JsonRoundTrip()
    {
        var text = "{\"a\":[1,2.5,-3e2,true,false,null],\"s\":\"q\\\"\\\\\\n\\u00e9\\ud83d\\ude00/\",\"o\":{}}";
        var v = (Dictionary<string, object>)Json.Parse(text);
        var a = (List<object>)v["a"];
        Eq(1.0, (double)a[0], "a[0]");
        Eq(2.5, (double)a[1], "a[1]");
        Eq(-300.0, (double)a[2], "a[2]");
        Eq(true, (bool)a[3], "a[3]");
        Check(a[5] == null, "a[5] is null");
        Eq("q\"\\\n\u00e9\U0001F600/", (string)v["s"], "s");
        var back = Json.Serialize(v);
        Eq(Json.Serialize(Json.Parse(back)), back, "serialize is stable");
        Eq("{\"x\":\"a\\u0001\\n\",\"n\":12,\"f\":0.125,\"l\":[\"b\"]}",
            Json.Serialize(new Dictionary<string, object> { { "x", "a\u0001\n" }, { "n", 12 }, { "f", 0.125 }, { "l", new[] { "b" } } }), "writer");
        Eq("9007199254740991", Json.Serialize(9007199254740991.0), "2^53-1 stays an integer");
        return Task.CompletedTask;
    }

    static Task JsonRefusesBadInput()
    {
        foreach (var bad in new[] { "", "{", "[1,]", "{\"a\" 1}", "01", "1.", "\"\\x\"", "\"a", "nul", "{} {}", "[1e999]", "\"\u0001\"", new string('[', 100) + new string(']', 100) })
        {
            try
            {
                Json.Parse(bad);
            }
            catch (FormatException)
            {
                continue;
            }
            throw new Exception("parsed bad JSON: " + bad);
        }
        return Task.CompletedTask;
    }

    static Task ErrorShape()
    {
        var e = ChatdException.FromBody(409, "{\"error\":{\"code\":\"name_taken\",\"message\":\"taken\"}}", null);
        Eq(ErrorCodes.NameTaken, e.Code, "code");
        Eq(409, e.Status, "status");
        Eq("taken", e.Message, "message");
        Check(!e.Retryable, "name_taken is not retryable");
        var h = ChatdException.FromBody(502, "<html>bad gateway</html>", null);
        Eq(ClientCodes.BadResponse, h.Code, "an HTML page");
        Check(h.Retryable, "a 502 is retryable");
        Eq(TimeSpan.FromSeconds(1.5), ChatdException.WaitFromMessage("too fast; wait 1.5 s").Value, "wait from a rate_limited frame");
        try
        {
            new ChatdClient("ftp://x");
            throw new Exception("an ftp base URL was taken");
        }
        catch (ArgumentException)
        {
        }
        return Task.CompletedTask;
    }

    static Task MessageIdOrder()
    {
        Check(RealtimeClient.CompareIds("1796114764962-000002", "1796114764962-10") < 0, "padded before raw 10");
        Eq(0, RealtimeClient.CompareIds("1796114764962-000001", "1796114764962-1"), "padded equals raw");
        Check(RealtimeClient.CompareIds("1796114764963-0", "1796114764962-999999") > 0, "ms first");
        return Task.CompletedTask;
    }

    // ---- against chatd ----

    static async Task Sessions()
    {
        var a = new ChatdClient(urls[0]);
        var s = await a.SignInAsync(Name("sess"));
        Eq(Name("sess"), s.User, "user");
        Check(s.Token.Length > 20, "a token");
        var b = new ChatdClient(urls[1]);
        var taken = await Throws(() => b.SignInAsync(Name("sess")));
        Eq(ErrorCodes.NameTaken, taken.Code, "a second guest of the name on the other node");
        Eq(409, taken.Status, "its status");
        var bad = await Throws(() => b.SignInAsync("no spaces allowed"));
        Eq(ErrorCodes.BadName, bad.Code, "a bad name");
        Eq(400, bad.Status, "its status");
        var old = a.Token;
        await a.SignOutAsync();
        var c = new ChatdClient(new ClientOptions { BaseUrls = urls, Token = old });
        var ended = await Throws(() => c.WalletAsync());
        Eq(ErrorCodes.BadToken, ended.Code, "the signed-out token");
        Eq(401, ended.Status, "its status");
        await b.SignInAsync(Name("sess")); // the name is free again
    }

    static async Task Failover()
    {
        var c = new ChatdClient("http://127.0.0.1:1", urls[0]);
        // A sign-in is not retried (a repeat would meet its own claim): it
        // fails on the dead URL, and moves the client to the next one.
        var down = await Throws(() => c.SignInAsync(Name("fo")));
        Eq(ClientCodes.Network, down.Code, "the dead URL: " + down.Message);
        Eq(0, down.Status, "no answer, no status");
        await c.SignInAsync(Name("fo"));
        Eq(urls[0], c.BaseUrl, "the client moved to the live node");
        var lobbies = await c.LobbiesAsync();
        Check(lobbies != null, "lobbies read");
        // A read retried over the dead URL lands on the live one.
        var d = new ChatdClient(new ClientOptions { BaseUrls = new[] { "http://127.0.0.1:1", urls[1] }, Token = c.Token });
        var w = await d.WalletAsync();
        Eq(0L, w.Balance, "a new user's balance");
        Eq(urls[1], d.BaseUrl, "moved");
    }

    static async Task CrossNodeChat()
    {
        var a = await User("ca", urls[0]);
        var b = await User("cb", urls[1]);
        var ra = a.Realtime();
        var rb = b.Realtime();
        var got = new List<Message>();
        rb.MessageReceived += m => { lock (got) got.Add(m); };
        await ra.ConnectAsync();
        await rb.ConnectAsync();
        Check(ra.Node != rb.Node, "the two clients are on two nodes (" + ra.Node + ", " + rb.Node + ")");
        var lobby = Name("chat");
        var roomA = await ra.JoinAsync(lobby);
        var roomB = await rb.JoinAsync(lobby);
        Eq(roomA.Id, roomB.Id, "one room");
        var id = await ra.SayAsync(roomA.Id, "hello from node 1");
        await Until(() => { lock (got) return got.Any(m => m.Id == id); }, "b receives the say");
        lock (got)
        {
            var m = got.Single(x => x.Id == id);
            Eq("hello from node 1", m.Text, "text");
            Eq(Name("ca"), m.From, "from");
        }
        var e = await Throws(() => rb.SayAsync(Name("nosuch") + "-1", "x"));
        Check(e.Code == ErrorCodes.NotSeated || e.Code == ErrorCodes.UnknownRoom, "a say to a room not joined: " + e.Code);
        ra.Close();
        rb.Close();
        Eq(RealtimeState.Closed, ra.State, "closed");
        var after = await Throws(() => ra.SayAsync(roomA.Id, "late"));
        Eq(ClientCodes.Closed, after.Code, "a say after Close");
    }

    static async Task PollAndIdempotency()
    {
        var c = await User("pc", urls[1]);
        var first = await c.PollAsync();
        foreach (var s in new[] { "rooms", "messages", "settings", "wallet" }) Check(first.Dirty.Contains(s), "a new session's first poll has " + s + " dirty: " + string.Join(",", first.Dirty));
        var clean = await c.PollAsync();
        Eq(0, clean.Dirty.Count, "a second poll is clean: " + string.Join(",", clean.Dirty));

        var lobby = Name("poll");
        var room = await c.JoinAsync(lobby);
        var p = await User("pp", urls[0]);
        await p.JoinAsync(lobby);
        await c.PollAsync(); // the join marked rooms dirty
        var parked = c.PollAsync(20);
        var key = "k-" + run;
        var m1 = await p.PostMessageAsync(room.Id, "once", key);
        var m2 = await p.PostMessageAsync(room.Id, "once", key);
        Eq(m1.Id, m2.Id, "the same Idempotency-Key gives the first message");
        // The parked poll may wake first for the rooms section: p's join
        // marks c's rooms dirty, and a mark is sent asynchronously, so it
        // may land after the poll above. The messages section follows.
        var ans = await parked;
        for (int i = 0; i < 3 && !ans.Dirty.Contains("messages"); i++) ans = await c.PollAsync(20);
        Check(ans.Dirty.Contains("messages"), "the long poll wakes with messages dirty: " + string.Join(",", ans.Dirty));
        var msgs = ans.Messages[room.Id];
        Eq(1, msgs.Count(m => m.Text == "once"), "the message is there once");

        // The poll loop hands over the answers with dirty sections and ends
        // without an error when cancelled.
        var seen = new List<PollAnswer>();
        using (var stop = new CancellationTokenSource())
        {
            var loop = c.PollLoopAsync(a => { lock (seen) seen.Add(a); }, stop.Token, 5);
            var m3 = await p.PostMessageAsync(room.Id, "through the loop");
            await Until(() => { lock (seen) return seen.Any(a => a.Messages.ContainsKey(room.Id) && a.Messages[room.Id].Any(m => m.Id == m3.Id)); }, "the loop's answer");
            stop.Cancel();
            await loop;
        }

        // A purchase with a key buys once.
        var adm = Admin();
        var item = Name("gem");
        await adm.RequestAsync("POST", "/shop/items", new RequestOptions { Body = new Dictionary<string, object> { { "item", item }, { "stock", 5 }, { "price", 10 } } });
        await adm.RequestAsync("POST", "/wallet/grant", new RequestOptions { Body = new Dictionary<string, object> { { "user", c.User }, { "amount", 100 } } });
        var bk = "buy-" + run;
        var w1 = await c.BuyAsync(item, 2, bk);
        var w2 = await c.BuyAsync(item, 2, bk);
        Eq(80L, w1.Balance, "balance after buying 2 at 10");
        Eq(80L, w2.Balance, "the repeated key buys nothing more");
        Eq(2L, (await c.WalletAsync()).Items[item], "2 owned");
        var sold = await Throws(() => c.BuyAsync(item, 4));
        Eq(ErrorCodes.SoldOut, sold.Code, "more than the stock");
        Eq(409, sold.Status, "its status");
        var poll = await c.PollAsync();
        Check(poll.Dirty.Contains("wallet"), "the purchase marked the wallet dirty: " + string.Join(",", poll.Dirty));
        Eq(80L, poll.Wallet.Balance, "the poll's wallet");
    }

    static async Task Leaderboard()
    {
        var c = await User("lb", urls[0]);
        await c.PollAsync();
        var board = Name("board");
        var e = await c.PostScoreAsync(board, c.User, 42.5);
        Eq(42.5, e.Score, "the posted score");
        Eq(0L, e.Rank, "the first entry is best");
        var top = await c.LeaderboardTopAsync(board, 10);
        Eq(1, top.Count, "one entry");
        Eq(c.User, top[0].Player, "its player");
        var poll = await c.PollAsync();
        Check(poll.Dirty.Contains("leaderboards"), "the post marked leaderboards dirty: " + string.Join(",", poll.Dirty));
        Eq(42.5, poll.Leaderboards[board].Score, "the poll's entry");
        var unknown = await Throws(() => c.LeaderboardPlayerAsync(board, Name("nobody")));
        Eq(ErrorCodes.UnknownPlayer, unknown.Code, "a player with no score");
        Eq(404, unknown.Status, "its status");
    }

    static async Task Matchmaking()
    {
        var a = await User("ma", urls[0]);
        var b = await User("mb", urls[1]);
        var ra = a.Realtime();
        var matched = new List<MatchEvent>();
        ra.Matched += m => { lock (matched) matched.Add(m); };
        await ra.ConnectAsync();
        var unknown = await Throws(() => b.SubmitTicketAsync(Name("noqueue"), 1500));
        Eq(ErrorCodes.UnknownQueue, unknown.Code, "an undefined queue");
        Eq(404, unknown.Status, "its status");
        // An attribute of this run keeps other tests' tickets out of the match.
        var attrs = new Dictionary<string, string> { { "run", run } };
        var ta = await ra.QueueAsync("quick", 1500, null, attrs);
        Check(ta.State == "waiting" || ta.State == "matched", "a's ticket: " + ta.State);
        var tb = await b.SubmitTicketAsync("quick", 1510, null, attrs);
        Ticket rb = tb;
        await Until(() =>
        {
            lock (matched) if (matched.Count == 0) return false;
            return true;
        }, "a's matched event", 60);
        MatchEvent me;
        lock (matched) me = matched[0];
        Eq("matched", me.Type, "event type");
        Eq(ta.Id, me.TicketId, "a's ticket");
        CollectionEq(new[] { a.User, b.User }, me.Players, "players");
        await Until(() =>
        {
            rb = b.TicketAsync("quick", tb.Id).Result;
            return rb.State == "matched";
        }, "b's ticket matched", 60);
        Eq(me.Room, rb.Room, "one room for both");
        var roomA = await ra.EnterAsync(me.Room);
        var roomB = await b.JoinRoomAsync(rb.Room);
        Eq(roomA.Id, roomB.Id, "both seated");
        var poll = await b.PollAsync();
        Check(poll.Match.Any(m => m.TicketId == tb.Id && m.Type == "matched"), "b's poll has the match");
        var outsider = await User("mo", urls[0]);
        var hidden = await Throws(() => outsider.JoinRoomAsync(me.Room));
        Eq(ErrorCodes.UnknownRoom, hidden.Code, "a match room of other players answers as no room");
        ra.Close();
    }

    static async Task ClosedForGood()
    {
        var a = await User("cg", urls[1]);
        var ra = a.Realtime();
        var closed = new List<int>();
        ra.ClosedForGood += (code, why) => { lock (closed) closed.Add(code); };
        await ra.ConnectAsync();
        await a.SignOutAsync();
        await Until(() => { lock (closed) return closed.Count > 0; }, "the close for good");
        lock (closed) Eq(4000, closed[0], "close code");
        Eq(RealtimeState.Closed, ra.State, "state");

        lock (closed) Eq(1, closed.Count, "one ClosedForGood");

        // A ConnectAsync cancelled while no node answers throws aborted;
        // the client goes on trying until Close.
        var dead = new RealtimeClient(new RealtimeOptions { Urls = new[] { "ws://127.0.0.1:1/ws" }, Token = () => a.Token ?? "" });
        var states = new List<RealtimeState>();
        dead.StateChanged += st => { lock (states) states.Add(st); };
        using (var cts = new CancellationTokenSource(TimeSpan.FromMilliseconds(300)))
        {
            var ab = await Throws(() => dead.ConnectAsync(cts.Token));
            Eq(ClientCodes.Aborted, ab.Code, "a cancelled connect");
        }
        Eq(RealtimeState.Connecting, dead.State, "still connecting");
        dead.Close();
        Eq(RealtimeState.Closed, dead.State, "closed");
        var late = await Throws(() => dead.ConnectAsync());
        Eq(ClientCodes.Closed, late.Code, "a connect after Close");
        await Until(() => { lock (states) return states.Count(x => x == RealtimeState.Closed) == 1; }, "one Closed state change");

        var bad = new RealtimeClient(new RealtimeOptions { Urls = new[] { urls[0].Replace("http", "ws") + "/ws" }, Token = () => "not-a-token" });
        var e = await Throws(() => bad.ConnectAsync());
        Eq(ErrorCodes.BadToken, e.Code, "a refused open: " + e.Message);
        Eq(RealtimeState.Closed, bad.State, "a refused client stops");
    }

    // QueueContext runs posted callbacks on one thread of its own, as
    // Unity's main-thread context does once a frame.
    sealed class QueueContext : SynchronizationContext
    {
        readonly System.Collections.Concurrent.BlockingCollection<Action> q = new System.Collections.Concurrent.BlockingCollection<Action>();
        public readonly Thread Thread;
        public int Posted;

        public QueueContext()
        {
            Thread = new Thread(() => { foreach (var a in q.GetConsumingEnumerable()) a(); }) { IsBackground = true };
            Thread.Start();
        }

        public override void Post(SendOrPostCallback d, object state)
        {
            Interlocked.Increment(ref Posted);
            q.Add(() => d(state));
        }
    }

    static async Task EventsOnContext()
    {
        var ctx = new QueueContext();
        var a = await User("cx", urls[0]);
        var ra = a.Realtime(new RealtimeOptions { Context = ctx });
        var wrong = 0;
        var got = new List<string>();
        ra.MessageReceived += m =>
        {
            if (Thread.CurrentThread != ctx.Thread) Interlocked.Increment(ref wrong);
            lock (got) got.Add(m.Text);
        };
        ra.Joined += r => { if (Thread.CurrentThread != ctx.Thread) Interlocked.Increment(ref wrong); };
        await ra.ConnectAsync();
        var room = await ra.JoinAsync(Name("ctx"));
        for (var i = 0; i < 5; i++) await ra.SayAsync(room.Id, "c" + i);
        await Until(() => { lock (got) return got.Count == 5; }, "5 messages through the context");
        lock (got) Eq("c0 c1 c2 c3 c4", string.Join(" ", got), "in order");
        Eq(0, wrong, "handlers that ran off the context's thread");
        Check(ctx.Posted >= 6, "posted to the context: " + ctx.Posted);
        ra.Close();
    }

    static void CollectionEq(IEnumerable<string> want, IEnumerable<string> got, string what)
    {
        var w = want.OrderBy(x => x, StringComparer.Ordinal).ToList();
        var g = got.OrderBy(x => x, StringComparer.Ordinal).ToList();
        if (!w.SequenceEqual(g)) throw new Exception(what + ": want " + string.Join(",", w) + ", got " + string.Join(",", g));
    }

    static async Task KillAndResume()
    {
        // r listens through node 1 then node 2; s talks through node 2.
        var r = await User("kr", urls[0], urls[1]);
        var s = await User("ks", urls[1]);
        var rr = r.Realtime(new RealtimeOptions { Backoff = new Backoff(TimeSpan.FromMilliseconds(500), TimeSpan.FromSeconds(2)) });
        var sr = s.Realtime();
        var got = new List<Message>();
        var states = new List<RealtimeState>();
        rr.MessageReceived += m => { lock (got) got.Add(m); };
        rr.StateChanged += st => { lock (states) states.Add(st); };
        await rr.ConnectAsync();
        await sr.ConnectAsync();
        var node1 = rr.Node;
        var lobby = Name("kill");
        var room = await rr.JoinAsync(lobby);
        await sr.JoinAsync(lobby);
        var sent = new List<string>();
        for (var i = 0; i < 3; i++) sent.Add(await sr.SayAsync(room.Id, "before " + i));
        await Until(() => { lock (got) return got.Count(m => m.Text.StartsWith("before ")) == 3; }, "the first 3 messages");

        Console.WriteLine("KILL 0");
        Console.Out.Flush();
        var line = Console.ReadLine();
        Eq("KILLED", line, "the driver's answer");
        // Sent while r has no connection (it waits at least 250 ms before
        // reconnecting): r gets them only by resuming after its last id.
        for (var i = 0; i < 5; i++) sent.Add(await sr.SayAsync(room.Id, "during " + i));
        // A say of r's own while it is down is resent with its ref on the
        // next connection and stored once.
        var mine = rr.SayAsync(room.Id, "said while down");
        await Until(() => rr.State == RealtimeState.Open && rr.Node != node1, "r reconnected to node 2", 60);
        var myId = await mine;
        for (var i = 0; i < 2; i++) sent.Add(await sr.SayAsync(room.Id, "after " + i));
        sent.Add(myId);
        await Until(() => { lock (got) return sent.All(id => got.Any(m => m.Id == id)); }, "every message at r", 60);
        // Let anything late (a duplicate) arrive before counting: a final
        // ping round trip orders after every event the node had sent.
        await rr.PingAsync();
        lock (got)
        {
            var ids = got.Where(m => m.Room == room.Id).Select(m => m.Id).ToList();
            Eq(ids.Count, ids.Distinct().Count(), "no message twice: " + string.Join(" ", ids));
            foreach (var id in sent) Eq(1, ids.Count(x => x == id), "message " + id + " once");
            var sorted = ids.OrderBy(x => x, Comparer<string>.Create(RealtimeClient.CompareIds)).ToList();
            Check(ids.SequenceEqual(sorted), "in id order: " + string.Join(" ", ids));
            Eq(1, got.Count(m => m.Text == "said while down"), "the resent say stored once");
        }
        lock (states) Check(states.Contains(RealtimeState.Reconnecting), "went through reconnecting: " + string.Join(",", states));
        var sawSelfOnce = 0;
        foreach (var m in await s.HistoryAsync(room.Id)) if (m.Text == "said while down") sawSelfOnce++;
        Eq(1, sawSelfOnce, "the history holds the resent say once");
        rr.Close();
        sr.Close();
    }
}
