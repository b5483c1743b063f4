// Http: one request of the HTTP API with the SDK's retry and failover
// rules. A client holds one or more base URLs (nodes, or balancers): a
// request goes to the current one, and a failure that says the node is
// gone (no connection, a broken connection, 502, 503) moves the client to
// the next URL for this and later requests. Only requests safe to repeat
// (reads, idempotent writes, writes with an Idempotency-Key) are retried.

using System;
using System.Collections.Generic;
using System.Globalization;
using System.Net;
using System.Net.Http;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Chatd
{
    /// <summary>ClientOptions configure a ChatdClient; only BaseUrls is required.</summary>
    public sealed class ClientOptions
    {
        /// <summary>BaseUrls are the servers' origins (e.g. "https://chat.example.com"; the API is under /api/v1), tried in order on failover.</summary>
        public IList<string> BaseUrls = new List<string>();
        /// <summary>Token is a token to reuse (from an earlier sign-in, or a login service under --auth jwt); null for none.</summary>
        public string Token;
        /// <summary>User is that token's user, if known.</summary>
        public string User;
        /// <summary>Retries is how often a retryable request is retried, besides moving over every other base URL (default 2).</summary>
        public int Retries = 2;
        /// <summary>Backoff is the delay between retries (default base 250 ms, max 5 s).</summary>
        public Backoff Backoff = new Backoff(TimeSpan.FromMilliseconds(250), TimeSpan.FromSeconds(5));
        /// <summary>MaxRetryAfter: a longer Retry-After is thrown instead of waited out (default 30 s).</summary>
        public TimeSpan MaxRetryAfter = TimeSpan.FromSeconds(30);
        /// <summary>Timeout bounds each request (default 30 s; a long poll adds its wait).</summary>
        public TimeSpan Timeout = TimeSpan.FromSeconds(30);
        /// <summary>HttpClient is the client to send with (default a new one, owned by the ChatdClient).</summary>
        public HttpClient HttpClient;
    }

    /// <summary>Backoff is exponential backoff with full jitter: attempt n waits a random time up to min(Max, Base·2^n).</summary>
    public sealed class Backoff
    {
        /// <summary>Base is the first delay's upper bound.</summary>
        public readonly TimeSpan Base;
        /// <summary>Max caps every delay.</summary>
        public readonly TimeSpan Max;
        static readonly Random rnd = new Random();

        /// <summary>Backoff makes a backoff of base b and cap max.</summary>
        public Backoff(TimeSpan b, TimeSpan max)
        {
            Base = b;
            Max = max;
        }

        /// <summary>Delay is the wait before retry number attempt (from 0).</summary>
        public TimeSpan Delay(int attempt)
        {
            var cap = Math.Min(Max.TotalMilliseconds, Base.TotalMilliseconds * Math.Pow(2, Math.Min(attempt, 30)));
            double r;
            lock (rnd) r = rnd.NextDouble();
            return TimeSpan.FromMilliseconds(cap / 2 + r * cap / 2);
        }
    }

    /// <summary>RequestOptions are the knobs of one ChatdClient.RequestAsync call.</summary>
    public sealed class RequestOptions
    {
        /// <summary>Body is the JSON body (any value Json.Serialize writes), or null for none.</summary>
        public object Body;
        /// <summary>Query are query parameters; null values are left out.</summary>
        public IDictionary<string, object> Query;
        /// <summary>IdempotencyKey is sent as the Idempotency-Key header; the call's retries reuse it.</summary>
        public string IdempotencyKey;
        /// <summary>Retry says the call is safe to repeat (a read, an idempotent write, or one with an IdempotencyKey).</summary>
        public bool Retry;
        /// <summary>Token overrides the client's token for this call ("" sends none).</summary>
        public string Token;
        /// <summary>ExtraTimeout is added to the client's Timeout (a long poll's wait).</summary>
        public TimeSpan ExtraTimeout;
    }

    sealed class Http
    {
        readonly ClientOptions o;
        readonly HttpClient hc;
        readonly string[] urls;
        int cur;

        public Http(ClientOptions o)
        {
            if (o.BaseUrls == null || o.BaseUrls.Count == 0) throw new ArgumentException("ClientOptions.BaseUrls needs at least one URL");
            this.o = o;
            urls = new string[o.BaseUrls.Count];
            for (var i = 0; i < urls.Length; i++)
            {
                var u = o.BaseUrls[i];
                if (!Uri.IsWellFormedUriString(u, UriKind.Absolute) || !(u.StartsWith("http://") || u.StartsWith("https://")))
                    throw new ArgumentException("not an http(s) base URL: " + u);
                urls[i] = u.TrimEnd('/');
            }
            hc = o.HttpClient ?? new HttpClient { Timeout = System.Threading.Timeout.InfiniteTimeSpan };
        }

        public void Dispose()
        {
            if (o.HttpClient == null) hc.Dispose();
        }

        public string BaseUrl => urls[Volatile.Read(ref cur) % urls.Length];

        public IReadOnlyList<string> BaseUrls => urls;

        public TimeSpan Timeout => o.Timeout;

        // Failover moves to the next base URL unless another request did
        // already since this one started at from.
        public void Failover(int from)
        {
            Interlocked.CompareExchange(ref cur, (from + 1) % urls.Length, from);
        }

        public async Task<Dictionary<string, object>> Request(string method, string path, RequestOptions ro, string token, CancellationToken ct)
        {
            ro = ro ?? new RequestOptions();
            var attempts = ro.Retry ? o.Retries + urls.Length : 1;
            var failures = 0;
            for (var attempt = 0; ; attempt++)
            {
                var at = Volatile.Read(ref cur) % urls.Length;
                try
                {
                    return await Once(urls[at], method, path, ro, token, ct).ConfigureAwait(false);
                }
                catch (ChatdException e)
                {
                    var gone = e.Code == ClientCodes.Network || e.Status == 502 || e.Status == 503;
                    if (gone) Failover(at);
                    if (!ro.Retry || !e.Retryable || attempt + 1 >= attempts) throw;
                    if (e.RetryAfter.HasValue && e.RetryAfter.Value > o.MaxRetryAfter) throw;
                    // A node that is gone is skipped at once while another
                    // URL is left to try in this round; otherwise back off.
                    TimeSpan delay = TimeSpan.Zero;
                    if (!gone || urls.Length == 1 || (attempt + 1) % urls.Length == 0)
                    {
                        delay = o.Backoff.Delay(failures++);
                        if (e.RetryAfter.HasValue && e.RetryAfter.Value > delay) delay = e.RetryAfter.Value;
                    }
                    if (delay > TimeSpan.Zero)
                    {
                        try
                        {
                            await Task.Delay(delay, ct).ConfigureAwait(false);
                        }
                        catch (OperationCanceledException ex)
                        {
                            throw new ChatdException(ClientCodes.Aborted, "the call was cancelled", inner: ex);
                        }
                    }
                }
            }
        }

        async Task<Dictionary<string, object>> Once(string baseUrl, string method, string path, RequestOptions ro, string token, CancellationToken ct)
        {
            var url = new StringBuilder(baseUrl).Append("/api/v1").Append(path);
            if (ro.Query != null)
            {
                var sep = path.Contains("?") ? '&' : '?';
                foreach (var kv in ro.Query)
                {
                    if (kv.Value == null) continue;
                    var v = kv.Value is double d ? d.ToString("R", CultureInfo.InvariantCulture) : Convert.ToString(kv.Value, CultureInfo.InvariantCulture);
                    url.Append(sep).Append(Uri.EscapeDataString(kv.Key)).Append('=').Append(Uri.EscapeDataString(v));
                    sep = '&';
                }
            }
            using (var req = new HttpRequestMessage(new HttpMethod(method), url.ToString()))
            using (var cts = CancellationTokenSource.CreateLinkedTokenSource(ct))
            {
                var tok = ro.Token ?? token;
                if (!string.IsNullOrEmpty(tok)) req.Headers.TryAddWithoutValidation("Authorization", "Bearer " + tok);
                if (!string.IsNullOrEmpty(ro.IdempotencyKey)) req.Headers.TryAddWithoutValidation("Idempotency-Key", ro.IdempotencyKey);
                if (ro.Body != null) req.Content = new StringContent(Json.Serialize(ro.Body), Encoding.UTF8, "application/json");
                cts.CancelAfter(o.Timeout + ro.ExtraTimeout);
                HttpResponseMessage res;
                string body;
                try
                {
                    res = await hc.SendAsync(req, cts.Token).ConfigureAwait(false);
                    body = await res.Content.ReadAsStringAsync().ConfigureAwait(false);
                }
                catch (OperationCanceledException ex)
                {
                    if (ct.IsCancellationRequested) throw new ChatdException(ClientCodes.Aborted, "the call was cancelled", inner: ex);
                    throw new ChatdException(ClientCodes.Network, method + " " + path + ": no answer from " + baseUrl + " within " + (o.Timeout + ro.ExtraTimeout).TotalSeconds + " s", inner: ex);
                }
                catch (Exception ex) when (ex is HttpRequestException || ex is WebException || ex is System.IO.IOException || ex is System.Net.Sockets.SocketException)
                {
                    throw new ChatdException(ClientCodes.Network, method + " " + path + ": " + baseUrl + " could not be reached: " + Inner(ex), inner: ex);
                }
                using (res)
                {
                    var status = (int)res.StatusCode;
                    if (status >= 200 && status < 300)
                    {
                        try
                        {
                            return J.Obj(Json.Parse(body));
                        }
                        catch (FormatException ex)
                        {
                            throw new ChatdException(ClientCodes.BadResponse, method + " " + path + ": the answer is not JSON: " + ex.Message, status, inner: ex);
                        }
                    }
                    TimeSpan? retryAfter = null;
                    if (res.Headers.RetryAfter != null)
                    {
                        if (res.Headers.RetryAfter.Delta.HasValue) retryAfter = res.Headers.RetryAfter.Delta;
                        else if (res.Headers.RetryAfter.Date.HasValue)
                        {
                            var w = res.Headers.RetryAfter.Date.Value - DateTimeOffset.UtcNow;
                            retryAfter = w > TimeSpan.Zero ? w : TimeSpan.Zero;
                        }
                    }
                    throw ChatdException.FromBody(status, body, retryAfter);
                }
            }
        }

        static string Inner(Exception e)
        {
            while (e.InnerException != null) e = e.InnerException;
            return e.Message;
        }

        public static string Seg(string s) => Uri.EscapeDataString(s ?? "");

        public static string NewKey() => Guid.NewGuid().ToString("N");
    }
}
