// Types: the shapes of docs/PROTOCOL.md ("Shapes"), read from the parsed
// JSON. Fields the SDK does not know are ignored, as the compatibility
// rule asks.

using System.Collections.Generic;

namespace Chatd
{
    /// <summary>Session is the answer of a sign-in: the token and its user.</summary>
    public sealed class Session
    {
        /// <summary>Token is the bearer token of the session.</summary>
        public string Token;
        /// <summary>User is the signed-in user's name.</summary>
        public string User;

        internal static Session Read(Dictionary<string, object> o) => new Session { Token = J.Str(o, "token"), User = J.Str(o, "user") };
    }

    /// <summary>Room is a room of a lobby and the users seated in it.</summary>
    public sealed class Room
    {
        /// <summary>Id is "{lobby}-{seq}".</summary>
        public string Id;
        /// <summary>Lobby is the room's lobby.</summary>
        public string Lobby;
        /// <summary>Seq is the room's number in its lobby, from 1.</summary>
        public long Seq;
        /// <summary>Capacity is the current room.capacity.</summary>
        public long Capacity;
        /// <summary>Members are the users holding a live seat.</summary>
        public List<string> Members;

        internal static Room Read(Dictionary<string, object> o) => new Room
        {
            Id = J.Str(o, "id"), Lobby = J.Str(o, "lobby"), Seq = J.Long(o, "seq"),
            Capacity = J.Long(o, "capacity"), Members = J.Strings(o, "members"),
        };
    }

    /// <summary>Message is a chat message of a room.</summary>
    public sealed class Message
    {
        /// <summary>Id is the message id, "13 digits-6 digits", which sorts in send order within a room.</summary>
        public string Id;
        /// <summary>Room is the room's id.</summary>
        public string Room;
        /// <summary>From is the sender's name, or "@system".</summary>
        public string From;
        /// <summary>Text is the message's text.</summary>
        public string Text;
        /// <summary>Ts is the time it was stored, RFC 3339 with milliseconds.</summary>
        public string Ts;

        internal static Message Read(Dictionary<string, object> o) => new Message
        {
            Id = J.Str(o, "id"), Room = J.Str(o, "room"), From = J.Str(o, "from"), Text = J.Str(o, "text"), Ts = J.Str(o, "ts"),
        };
    }

    /// <summary>LobbySummary is one lobby of GET /lobbies.</summary>
    public sealed class LobbySummary
    {
        /// <summary>Lobby is the lobby's name.</summary>
        public string Lobby;
        /// <summary>Online counts its seated users.</summary>
        public long Online;
        /// <summary>Rooms counts its rooms.</summary>
        public long Rooms;

        internal static LobbySummary Read(Dictionary<string, object> o) => new LobbySummary
        {
            Lobby = J.Str(o, "lobby"), Online = J.Long(o, "online"), Rooms = J.Long(o, "rooms"),
        };
    }

    /// <summary>Entry is a player's place on a leaderboard (rank 0 is best; -1 for no score).</summary>
    public sealed class Entry
    {
        /// <summary>Player is the player's name.</summary>
        public string Player;
        /// <summary>Score is the player's score.</summary>
        public double Score;
        /// <summary>Rank is the 0-based rank.</summary>
        public long Rank;

        internal static Entry Read(Dictionary<string, object> o) => new Entry
        {
            Player = J.Str(o, "player"), Score = J.Num(o, "score"), Rank = J.Long(o, "rank"),
        };
    }

    /// <summary>Wallet is a user's balance and items.</summary>
    public sealed class Wallet
    {
        /// <summary>Balance is the user's currency.</summary>
        public long Balance;
        /// <summary>Items maps an item to the quantity owned.</summary>
        public Dictionary<string, long> Items = new Dictionary<string, long>();

        internal static Wallet Read(Dictionary<string, object> o)
        {
            var w = new Wallet { Balance = J.Long(o, "balance") };
            foreach (var kv in J.Obj(J.Get(o, "items"))) w.Items[kv.Key] = kv.Value is double d ? (long)d : 0;
            return w;
        }
    }

    /// <summary>Item is a shop item.</summary>
    public sealed class Item
    {
        /// <summary>Name is the item's name (the JSON field "item").</summary>
        public string Name;
        /// <summary>Stock is the units left.</summary>
        public long Stock;
        /// <summary>Price is the price of one unit.</summary>
        public long Price;

        internal static Item Read(Dictionary<string, object> o) => new Item
        {
            Name = J.Str(o, "item"), Stock = J.Long(o, "stock"), Price = J.Long(o, "price"),
        };
    }

    /// <summary>Ticket is a matchmaking ticket.</summary>
    public sealed class Ticket
    {
        /// <summary>Id is the ticket's id.</summary>
        public string Id;
        /// <summary>Queue is its queue.</summary>
        public string Queue;
        /// <summary>User is the user who submitted it.</summary>
        public string User;
        /// <summary>Party are the other users matched with it.</summary>
        public List<string> Party;
        /// <summary>Skill is the skill it was matched by.</summary>
        public double Skill;
        /// <summary>State is "waiting", "matched", "expired" or "cancelled".</summary>
        public string State;
        /// <summary>Match is the match's id once matched.</summary>
        public string Match;
        /// <summary>Room is the match's room once matched: join it by id (RealtimeClient.Enter, ChatdClient.JoinRoom).</summary>
        public string Room;
        /// <summary>Players are the match's players once matched.</summary>
        public List<string> Players;
        /// <summary>Created is the submission time, unix ms.</summary>
        public long Created;

        internal static Ticket Read(Dictionary<string, object> o) => new Ticket
        {
            Id = J.Str(o, "id"), Queue = J.Str(o, "queue"), User = J.Str(o, "user"), Party = J.Strings(o, "party"),
            Skill = J.Num(o, "skill"), State = J.Str(o, "state"), Match = J.Str(o, "match"), Room = J.Str(o, "room"),
            Players = J.Strings(o, "players"), Created = J.Long(o, "created"),
        };
    }

    /// <summary>MatchEvent is what a player is told of a ticket: Type "matched" or "ticket_expired".</summary>
    public sealed class MatchEvent
    {
        /// <summary>Type is "matched" or "ticket_expired".</summary>
        public string Type;
        /// <summary>Queue is the ticket's queue.</summary>
        public string Queue;
        /// <summary>TicketId is the ticket's id.</summary>
        public string TicketId;
        /// <summary>Match is the match's id (matched).</summary>
        public string Match;
        /// <summary>Room is the match's room (matched): take the seat within ReserveSeconds.</summary>
        public string Room;
        /// <summary>Players are the match's players (matched).</summary>
        public List<string> Players;
        /// <summary>ReserveSeconds is how long the seat is held (matched).</summary>
        public long ReserveSeconds;
        /// <summary>Ts is the event's time, unix ms.</summary>
        public long Ts;

        internal static MatchEvent Read(Dictionary<string, object> o) => new MatchEvent
        {
            Type = J.Str(o, "type"), Queue = J.Str(o, "queue"), TicketId = J.Str(o, "ticket"), Match = J.Str(o, "match"),
            Room = J.Str(o, "room"), Players = J.Strings(o, "players"), ReserveSeconds = J.Long(o, "reserve_seconds"), Ts = J.Long(o, "ts"),
        };
    }

    /// <summary>PollAnswer is a GET /poll answer: the dirty sections and each one's fresh data.</summary>
    public sealed class PollAnswer
    {
        /// <summary>Dirty are the sections that changed ("rooms", "messages", "leaderboards", "settings", "wallet", "notices", "match").</summary>
        public List<string> Dirty;
        /// <summary>Data is each dirty section's data, as parsed JSON (see the typed accessors).</summary>
        public Dictionary<string, object> Data;

        /// <summary>Rooms is the "rooms" section: the session's rooms (empty when not dirty).</summary>
        public List<Room> Rooms
        {
            get
            {
                var r = new List<Room>();
                foreach (var v in J.Get(Data, "rooms") as List<object> ?? new List<object>()) r.Add(Room.Read(J.Obj(v)));
                return r;
            }
        }

        /// <summary>Messages is the "messages" section: new messages by room, oldest first.</summary>
        public Dictionary<string, List<Message>> Messages
        {
            get
            {
                var r = new Dictionary<string, List<Message>>();
                foreach (var kv in J.Obj(J.Get(Data, "messages")))
                {
                    var l = new List<Message>();
                    foreach (var m in kv.Value as List<object> ?? new List<object>()) l.Add(Message.Read(J.Obj(m)));
                    r[kv.Key] = l;
                }
                return r;
            }
        }

        /// <summary>Leaderboards is the "leaderboards" section: the user's own entry on each board posted to.</summary>
        public Dictionary<string, Entry> Leaderboards
        {
            get
            {
                var r = new Dictionary<string, Entry>();
                foreach (var kv in J.Obj(J.Get(Data, "leaderboards"))) r[kv.Key] = Entry.Read(J.Obj(kv.Value));
                return r;
            }
        }

        /// <summary>Wallet is the "wallet" section, or null when not dirty.</summary>
        public Wallet Wallet => J.Get(Data, "wallet") is Dictionary<string, object> w ? Wallet.Read(w) : null;

        /// <summary>Match is the "match" section: the user's recent match events, newest first.</summary>
        public List<MatchEvent> Match
        {
            get
            {
                var r = new List<MatchEvent>();
                foreach (var v in J.Get(Data, "match") as List<object> ?? new List<object>()) r.Add(MatchEvent.Read(J.Obj(v)));
                return r;
            }
        }

        internal static PollAnswer Read(Dictionary<string, object> o) => new PollAnswer { Dirty = J.Strings(o, "dirty"), Data = J.Obj(J.Get(o, "data")) };
    }
}
