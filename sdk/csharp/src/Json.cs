// Json: the small JSON reader and writer the SDK speaks chatd's protocol
// with. netstandard2.0 has no JSON library of its own (System.Text.Json is
// a package, and Unity ships its own Newtonsoft build), so the SDK carries
// one that needs nothing but the base class library.

using System;
using System.Collections;
using System.Collections.Generic;
using System.Globalization;
using System.Text;

namespace Chatd
{
    /// <summary>
    /// Json reads a JSON text into plain objects — an object is a
    /// Dictionary&lt;string, object&gt;, an array a List&lt;object&gt;, a
    /// number a double, then string, bool and null — and writes such
    /// objects (and any IDictionary, IEnumerable or number) back.
    /// </summary>
    public static class Json
    {
        /// <summary>MaxDepth is the deepest nesting Parse accepts (chatd's own limit is 32).</summary>
        public const int MaxDepth = 64;

        /// <summary>
        /// Parse reads exactly one JSON value (surrounding whitespace allowed).
        /// It throws FormatException, naming the offset, for anything else.
        /// </summary>
        public static object Parse(string text)
        {
            if (text == null) throw new ArgumentNullException(nameof(text));
            var r = new Reader(text);
            r.SkipWs();
            var v = r.Value(0);
            r.SkipWs();
            if (r.Pos != text.Length) throw r.Fail("text after the JSON value");
            return v;
        }

        /// <summary>Serialize writes v as compact JSON.</summary>
        public static string Serialize(object v)
        {
            var sb = new StringBuilder();
            Write(sb, v, 0);
            return sb.ToString();
        }

        static void Write(StringBuilder sb, object v, int depth)
        {
            if (depth > MaxDepth) throw new ArgumentException("Json: value nested deeper than " + MaxDepth);
            if (v == null) { sb.Append("null"); return; }
            if (v is string) { WriteString(sb, (string)v); return; }
            if (v is bool) { sb.Append((bool)v ? "true" : "false"); return; }
            if (v is double) { WriteDouble(sb, (double)v); return; }
            if (v is float) { WriteDouble(sb, (float)v); return; }
            if (v is decimal) { sb.Append(((decimal)v).ToString(CultureInfo.InvariantCulture)); return; }
            if (v is int || v is long || v is short || v is byte || v is sbyte || v is ushort || v is uint || v is ulong)
            {
                sb.Append(Convert.ToString(v, CultureInfo.InvariantCulture));
                return;
            }
            var dict = v as IDictionary;
            if (dict != null)
            {
                sb.Append('{');
                var first = true;
                foreach (DictionaryEntry e in dict)
                {
                    if (!first) sb.Append(',');
                    first = false;
                    WriteString(sb, Convert.ToString(e.Key, CultureInfo.InvariantCulture));
                    sb.Append(':');
                    Write(sb, e.Value, depth + 1);
                }
                sb.Append('}');
                return;
            }
            var list = v as IEnumerable;
            if (list != null)
            {
                sb.Append('[');
                var f1 = true;
                foreach (var e in list)
                {
                    if (!f1) sb.Append(',');
                    f1 = false;
                    Write(sb, e, depth + 1);
                }
                sb.Append(']');
                return;
            }
            throw new ArgumentException("Json: cannot write a " + v.GetType().Name);
        }

        static void WriteDouble(StringBuilder sb, double d)
        {
            if (double.IsNaN(d) || double.IsInfinity(d)) throw new ArgumentException("Json: NaN and infinities are not JSON");
            if (d == Math.Floor(d) && Math.Abs(d) < 1e15) sb.Append(((long)d).ToString(CultureInfo.InvariantCulture));
            else sb.Append(d.ToString("R", CultureInfo.InvariantCulture));
        }

        static void WriteString(StringBuilder sb, string s)
        {
            sb.Append('"');
            foreach (var c in s)
            {
                switch (c)
                {
                    case '"': sb.Append("\\\""); break;
                    case '\\': sb.Append("\\\\"); break;
                    case '\n': sb.Append("\\n"); break;
                    case '\r': sb.Append("\\r"); break;
                    case '\t': sb.Append("\\t"); break;
                    case '\b': sb.Append("\\b"); break;
                    case '\f': sb.Append("\\f"); break;
                    default:
                        if (c < 0x20 || c == '\u2028' || c == '\u2029') sb.Append("\\u").Append(((int)c).ToString("x4"));
                        else sb.Append(c);
                        break;
                }
            }
            sb.Append('"');
        }

        sealed class Reader
        {
            readonly string s;
            public int Pos;

            public Reader(string s) { this.s = s; }

            public FormatException Fail(string why) => new FormatException("Json: " + why + " at offset " + Pos);

            public void SkipWs()
            {
                while (Pos < s.Length && (s[Pos] == ' ' || s[Pos] == '\t' || s[Pos] == '\n' || s[Pos] == '\r')) Pos++;
            }

            public object Value(int depth)
            {
                if (depth > MaxDepth) throw Fail("nested deeper than " + MaxDepth);
                if (Pos >= s.Length) throw Fail("unexpected end");
                var c = s[Pos];
                switch (c)
                {
                    case '{': return Obj(depth);
                    case '[': return Arr(depth);
                    case '"': return Str();
                    case 't': Lit("true"); return true;
                    case 'f': Lit("false"); return false;
                    case 'n': Lit("null"); return null;
                    default:
                        if (c == '-' || (c >= '0' && c <= '9')) return Num();
                        throw Fail("unexpected '" + c + "'");
                }
            }

            void Lit(string w)
            {
                if (string.CompareOrdinal(s, Pos, w, 0, w.Length) != 0) throw Fail("bad literal");
                Pos += w.Length;
            }

            Dictionary<string, object> Obj(int depth)
            {
                var d = new Dictionary<string, object>();
                Pos++;
                SkipWs();
                if (Pos < s.Length && s[Pos] == '}') { Pos++; return d; }
                while (true)
                {
                    SkipWs();
                    if (Pos >= s.Length || s[Pos] != '"') throw Fail("expected a string key");
                    var k = Str();
                    SkipWs();
                    if (Pos >= s.Length || s[Pos] != ':') throw Fail("expected ':'");
                    Pos++;
                    SkipWs();
                    d[k] = Value(depth + 1);
                    SkipWs();
                    if (Pos >= s.Length) throw Fail("unexpected end in an object");
                    if (s[Pos] == ',') { Pos++; continue; }
                    if (s[Pos] == '}') { Pos++; return d; }
                    throw Fail("expected ',' or '}'");
                }
            }

            List<object> Arr(int depth)
            {
                var l = new List<object>();
                Pos++;
                SkipWs();
                if (Pos < s.Length && s[Pos] == ']') { Pos++; return l; }
                while (true)
                {
                    SkipWs();
                    l.Add(Value(depth + 1));
                    SkipWs();
                    if (Pos >= s.Length) throw Fail("unexpected end in an array");
                    if (s[Pos] == ',') { Pos++; continue; }
                    if (s[Pos] == ']') { Pos++; return l; }
                    throw Fail("expected ',' or ']'");
                }
            }

            string Str()
            {
                Pos++;
                var sb = new StringBuilder();
                while (true)
                {
                    if (Pos >= s.Length) throw Fail("unterminated string");
                    var c = s[Pos++];
                    if (c == '"') return sb.ToString();
                    if (c < 0x20) throw Fail("control character in a string");
                    if (c != '\\') { sb.Append(c); continue; }
                    if (Pos >= s.Length) throw Fail("unterminated escape");
                    var e = s[Pos++];
                    switch (e)
                    {
                        case '"': sb.Append('"'); break;
                        case '\\': sb.Append('\\'); break;
                        case '/': sb.Append('/'); break;
                        case 'b': sb.Append('\b'); break;
                        case 'f': sb.Append('\f'); break;
                        case 'n': sb.Append('\n'); break;
                        case 'r': sb.Append('\r'); break;
                        case 't': sb.Append('\t'); break;
                        case 'u':
                            if (Pos + 4 > s.Length) throw Fail("short \\u escape");
                            int code;
                            if (!int.TryParse(s.Substring(Pos, 4), NumberStyles.AllowHexSpecifier, CultureInfo.InvariantCulture, out code)) throw Fail("bad \\u escape");
                            sb.Append((char)code);
                            Pos += 4;
                            break;
                        default: throw Fail("bad escape");
                    }
                }
            }

            double Num()
            {
                var start = Pos;
                if (s[Pos] == '-') Pos++;
                if (Pos >= s.Length || !Digit(s[Pos])) throw Fail("bad number");
                if (s[Pos] == '0') Pos++;
                else while (Pos < s.Length && Digit(s[Pos])) Pos++;
                if (Pos < s.Length && s[Pos] == '.')
                {
                    Pos++;
                    if (Pos >= s.Length || !Digit(s[Pos])) throw Fail("bad fraction");
                    while (Pos < s.Length && Digit(s[Pos])) Pos++;
                }
                if (Pos < s.Length && (s[Pos] == 'e' || s[Pos] == 'E'))
                {
                    Pos++;
                    if (Pos < s.Length && (s[Pos] == '+' || s[Pos] == '-')) Pos++;
                    if (Pos >= s.Length || !Digit(s[Pos])) throw Fail("bad exponent");
                    while (Pos < s.Length && Digit(s[Pos])) Pos++;
                }
                double d;
                if (!double.TryParse(s.Substring(start, Pos - start), NumberStyles.Float, CultureInfo.InvariantCulture, out d) || double.IsInfinity(d))
                    throw Fail("number out of range");
                return d;
            }

            static bool Digit(char c) => c >= '0' && c <= '9';
        }
    }

    /// <summary>J reads fields of a parsed JSON object leniently: a missing or mistyped field gives the default.</summary>
    public static class J
    {
        /// <summary>Obj returns v as an object, or an empty one.</summary>
        public static Dictionary<string, object> Obj(object v) => v as Dictionary<string, object> ?? new Dictionary<string, object>();

        /// <summary>Get returns o[k], or null.</summary>
        public static object Get(Dictionary<string, object> o, string k)
        {
            object v;
            return o != null && o.TryGetValue(k, out v) ? v : null;
        }

        /// <summary>Str returns the string field k, or "".</summary>
        public static string Str(Dictionary<string, object> o, string k) => Get(o, k) as string ?? "";

        /// <summary>Num returns the number field k, or 0.</summary>
        public static double Num(Dictionary<string, object> o, string k) => Get(o, k) is double d ? d : 0;

        /// <summary>Long returns the number field k as an integer, or 0.</summary>
        public static long Long(Dictionary<string, object> o, string k) => (long)Num(o, k);

        /// <summary>Bool returns the bool field k, or false.</summary>
        public static bool Bool(Dictionary<string, object> o, string k) => Get(o, k) is bool b && b;

        /// <summary>List returns the array field k, or an empty list.</summary>
        public static List<object> List(Dictionary<string, object> o, string k) => Get(o, k) as List<object> ?? new List<object>();

        /// <summary>Strings returns the array field k's strings.</summary>
        public static List<string> Strings(Dictionary<string, object> o, string k)
        {
            var r = new List<string>();
            foreach (var v in List(o, k)) if (v is string s) r.Add(s);
            return r;
        }

        /// <summary>Map applies f to each object of the array field k.</summary>
        public static List<T> Map<T>(Dictionary<string, object> o, string k, Func<Dictionary<string, object>, T> f)
        {
            var r = new List<T>();
            foreach (var v in List(o, k)) r.Add(f(Obj(v)));
            return r;
        }
    }
}
