// Errors: every failure the SDK reports is a ChatdException carrying the
// documented code of docs/PROTOCOL.md ("Errors"), the message and the HTTP
// status, or one of the SDK's own ClientCodes when no server answered.

using System;
using System.Globalization;
using System.Text.RegularExpressions;

namespace Chatd
{
    /// <summary>ErrorCodes are the codes of docs/PROTOCOL.md's error table.</summary>
    public static class ErrorCodes
    {
#pragma warning disable 1591 // each constant is its code, documented in docs/PROTOCOL.md
        public const string BadJson = "bad_json";
        public const string BadRequest = "bad_request";
        public const string BadName = "bad_name";
        public const string BadValue = "bad_value";
        public const string UnknownSetting = "unknown_setting";
        public const string TooLong = "too_long";
        public const string UnknownType = "unknown_type";
        public const string BadToken = "bad_token";
        public const string Forbidden = "forbidden";
        public const string NotSeated = "not_seated";
        public const string Muted = "muted";
        public const string Banned = "banned";
        public const string NotFound = "not_found";
        public const string UnknownRoom = "unknown_room";
        public const string UnknownPlayer = "unknown_player";
        public const string UnknownItem = "unknown_item";
        public const string UnknownQueue = "unknown_queue";
        public const string UnknownTicket = "unknown_ticket";
        public const string UnknownMessage = "unknown_message";
        public const string MethodNotAllowed = "method_not_allowed";
        public const string Timeout = "timeout";
        public const string NameTaken = "name_taken";
        public const string RoomFull = "room_full";
        public const string SeatedElsewhere = "seated_elsewhere";
        public const string ResumeGap = "resume_gap";
        public const string SoldOut = "sold_out";
        public const string InsufficientFunds = "insufficient_funds";
        public const string BoardFull = "board_full";
        public const string TicketOpen = "ticket_open";
        public const string ConsentRequired = "consent_required";
        public const string Conflict = "conflict";
        public const string TooLarge = "too_large";
        public const string RateLimited = "rate_limited";
        public const string TooManyConnections = "too_many_connections";
        public const string Internal = "internal";
        public const string Busy = "busy";
        public const string RedisUnavailable = "redis_unavailable";
        public const string RedisOom = "redis_oom";
        public const string RedisBusy = "redis_busy";
        public const string Draining = "draining";
        public const string NotDurable = "not_durable";
#pragma warning restore 1591
    }

    /// <summary>ClientCodes are the SDK's own codes, for failures that carry no server code (Status 0 unless an HTTP answer came).</summary>
    public static class ClientCodes
    {
        /// <summary>Network: no server could be reached, or the connection broke before an answer.</summary>
        public const string Network = "network";
        /// <summary>Aborted: the call's CancellationToken fired.</summary>
        public const string Aborted = "aborted";
        /// <summary>BadResponse: an answer that is not the documented JSON (a proxy's HTML page, say).</summary>
        public const string BadResponse = "bad_response";
        /// <summary>Closed: the realtime client closed for good (Close, signed out, banned, kicked) before the frame was answered.</summary>
        public const string Closed = "closed";
        /// <summary>FrameTooLarge: a frame over the server's 64 KiB limit, not sent.</summary>
        public const string FrameTooLarge = "frame_too_large";
    }

    /// <summary>ChatdException is every error the SDK throws: Code (ErrorCodes or ClientCodes), Message and Status.</summary>
    public class ChatdException : Exception
    {
        /// <summary>Code is the documented code (ErrorCodes) or an SDK code (ClientCodes).</summary>
        public string Code { get; }
        /// <summary>Status is the HTTP status; 0 over the WebSocket and for failures without an answer.</summary>
        public int Status { get; }
        /// <summary>RetryAfter is the wait the server asked for (Retry-After, or a rate_limited frame's "wait N s"), if any.</summary>
        public TimeSpan? RetryAfter { get; }
        /// <summary>Ref is the frame's ref (WebSocket errors).</summary>
        public string Ref { get; }
        /// <summary>Room is the room the error concerns (WebSocket errors).</summary>
        public string Room { get; }

        /// <summary>ChatdException makes an error; status, retryAfter, reference, room and inner are optional.</summary>
        public ChatdException(string code, string message, int status = 0, TimeSpan? retryAfter = null, string reference = null, string room = null, Exception inner = null)
            : base(message, inner)
        {
            Code = code;
            Status = status;
            RetryAfter = retryAfter;
            Ref = reference;
            Room = room;
        }

        /// <summary>
        /// Retryable says whether the same request may succeed later without a
        /// change: network failures, 5xx, 429, conflict, busy and redis_unavailable.
        /// </summary>
        public bool Retryable =>
            Code == ClientCodes.Network || Status >= 500 || Status == 429 ||
            Code == ErrorCodes.Conflict || Code == ErrorCodes.RateLimited ||
            Code == ErrorCodes.Busy || Code == ErrorCodes.RedisUnavailable;

        /// <summary>ToString gives "code (status): message".</summary>
        public override string ToString() => Code + (Status != 0 ? " (" + Status + ")" : "") + ": " + Message;

        /// <summary>FromBody reads the error shape {"error": {"code", "message"}} of an HTTP answer; a body of another shape is bad_response.</summary>
        public static ChatdException FromBody(int status, string body, TimeSpan? retryAfter)
        {
            try
            {
                var e = J.Obj(J.Get(J.Obj(Json.Parse(body)), "error"));
                var code = J.Str(e, "code");
                if (code != "") return new ChatdException(code, J.Str(e, "message"), status, retryAfter);
            }
            catch (FormatException)
            {
            }
            var snippet = body.Length > 120 ? body.Substring(0, 120) : body;
            return new ChatdException(ClientCodes.BadResponse, "HTTP " + status + " without chatd's error shape: " + snippet, status, retryAfter);
        }

        static readonly Regex waitRe = new Regex(@"wait (\d+(?:\.\d+)?) ?s\b");

        /// <summary>WaitFromMessage reads the wait out of a rate_limited frame's message ("…; wait 1.5 s").</summary>
        public static TimeSpan? WaitFromMessage(string message)
        {
            var m = waitRe.Match(message ?? "");
            double s;
            if (m.Success && double.TryParse(m.Groups[1].Value, NumberStyles.Float, CultureInfo.InvariantCulture, out s)) return TimeSpan.FromSeconds(s);
            return null;
        }
    }
}
