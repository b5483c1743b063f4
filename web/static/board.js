// The leaderboard panel and its honest little game: click as fast as you
// can for five seconds; your best today is posted to clicks@daily with
// mode "best" (PROTOCOL.md, "Leaderboards").

import {api, seg} from './api.js';
import {h, $, setText} from './dom.js';

export const BOARD = 'clicks@daily';
const GAME_MS = 5000;
const REFRESH_MS = 15000;

export class Board {
  constructor({token, me, visible, message}) {
    this.token = token;
    this.message = message;
    this.me = me;
    this.visible = visible;
    this.running = false;
    this.timer = 0;
    $('game-start').addEventListener('click', () => this.play());
    const target = $('game-target');
    // Count pointer clicks and single key presses, not a held key's repeats.
    target.addEventListener('keydown', (e) => {
      if (e.repeat) e.preventDefault();
    });
    target.addEventListener('click', () => {
      if (this.running) this.clicks++;
      this.tick();
    });
  }

  start() {
    this.refresh();
    this.timer = setInterval(() => {
      if (this.visible() && document.visibilityState === 'visible') this.refresh();
    }, REFRESH_MS);
  }

  stop() {
    clearInterval(this.timer);
  }

  async refresh() {
    const b = seg(BOARD);
    const me = seg(this.me);
    const opts = {token: this.token};
    try {
      // POST ranks answers rank -1 for a player without a score, where
      // GET players/{me} would answer 404 (a console error in a browser):
      // "around me" is asked only for a player on the board.
      const [top, mine] = await Promise.all([
        api('GET', `/leaderboards/${b}/top?limit=10`, opts),
        api('POST', `/leaderboards/${b}/ranks`, {...opts, body: {players: [this.me]}}),
      ]);
      const e = mine.entries && mine.entries[0];
      const ranked = e && e.rank >= 0;
      const around = ranked ? await api('GET', `/leaderboards/${b}/around/${me}?radius=2`, opts).catch(notFound) : null;
      this.fill($('lb-top'), top.entries);
      this.fill($('lb-around'), around ? around.entries : []);
      setText($('lb-me'), ranked ? `#${e.rank + 1} with ${fmt(e.score)} clicks` : 'no score yet — play a round');
      setText($('lb-error'), '');
    } catch (err) {
      setText($('lb-error'), err.message);
    }
  }

  fill(list, entries) {
    list.replaceChildren(...(entries || []).map((e) => h('li', {
      class: e.player === this.me ? 'me-row' : null,
      'data-testid': 'lb-entry',
      'data-player': e.player,
    },
    h('span', {class: 'rank'}, `#${e.rank + 1}`),
    h('span', {class: 'player'}, e.player),
    h('span', {class: 'score'}, fmt(e.score)),
    e.player !== this.me && this.message
      ? h('button', {type: 'button', class: 'ghost dm-btn', 'data-testid': 'lb-message', 'aria-label': `Message ${e.player}`, onclick: () => this.message(e.player)}, 'Message')
      : null)));
  }

  play() {
    if (this.running) return;
    const start = $('game-start');
    const target = $('game-target');
    this.running = true;
    this.clicks = 0;
    this.ends = performance.now() + GAME_MS;
    start.hidden = true;
    target.hidden = false;
    target.disabled = false;
    target.focus();
    this.tick();
    this.ticker = setInterval(() => this.tick(), 100);
    setTimeout(() => this.finish(), GAME_MS);
  }

  tick() {
    if (!this.running) return;
    const left = Math.max(0, this.ends - performance.now()) / 1000;
    setText($('game-status'), `${left.toFixed(1)} s left · ${this.clicks} clicks`);
  }

  async finish() {
    this.running = false;
    clearInterval(this.ticker);
    const target = $('game-target');
    target.disabled = true;
    const score = this.clicks;
    setText($('game-status'), `${score} clicks — posting…`);
    try {
      const res = await api('POST', `/leaderboards/${seg(BOARD)}/scores`, {
        token: this.token,
        body: {player: this.me, score, mode: 'best'},
      });
      const e = res.entry;
      const best = e.score > score ? ` Your best today is ${fmt(e.score)}.` : ' A new best for today!';
      setText($('game-status'), `${score} clicks.${best} Rank #${e.rank + 1}.`);
    } catch (err) {
      setText($('game-status'), `${score} clicks — not posted: ${err.message}`);
    }
    target.hidden = true;
    const start = $('game-start');
    start.hidden = false;
    setText(start, 'Play again');
    start.focus();
    this.refresh();
  }
}

function notFound(err) {
  if (err.status === 404) return null;
  throw err;
}

function fmt(n) {
  return Number.isInteger(n) ? String(n) : Number(n).toFixed(2);
}
