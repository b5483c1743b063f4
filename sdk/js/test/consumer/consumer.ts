// A TypeScript program written against the package's published types:
// package.test.js compiles it (tsc --noEmit) after the types are built.
import {ChatdClient, ChatdError, ErrorCodes, CloseReasons, type Message, type PollAnswer} from '@chatd/client';

async function main(): Promise<void> {
  const api = new ChatdClient({baseUrl: 'http://localhost:8080'});
  const s = await api.signIn('alice');
  const token: string = s.token;
  const rt = api.realtime({url: ['ws://a/ws', 'ws://b/ws'], WebSocket: globalThis.WebSocket});
  rt.on('message', ({message}) => {
    const m: Message = message;
    void m.id.length;
  });
  rt.on('closed', (d) => {
    if (d.reason === CloseReasons.BANNED) void d.code.toFixed();
  });
  const room = await rt.join('general');
  try {
    const ack = await rt.say(room.id, 'hi', {signal: AbortSignal.timeout(5000)});
    void ack.id.length;
  } catch (e) {
    if (e instanceof ChatdError && e.code === ErrorCodes.RATE_LIMITED) void e.retryAfter;
  }
  for await (const a of api.pollLoop({wait: 25})) {
    const p: PollAnswer = a;
    void p.data.messages?.[room.id]?.[0]?.text;
    void p.data.wallet?.balance;
  }
  void token;
}
void main;
