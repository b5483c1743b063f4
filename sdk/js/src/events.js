// A typed EventTarget: events are CustomEvents whose detail has the type
// the event map gives their name. Works with addEventListener as any
// EventTarget (browsers, Node 20), plus on() that returns its undo.

/**
 * @template {Record<string, any>} M event name → detail type
 */
export class TypedEventTarget extends EventTarget {
  /**
   * on listens to one event type; it returns a function that stops it.
   * @template {keyof M & string} K
   * @param {K} type
   * @param {(detail: M[K], event: CustomEvent<M[K]>) => void} listener
   * @param {AddEventListenerOptions} [options]
   * @returns {() => void}
   */
  on(type, listener, options) {
    /** @param {Event} e */
    const f = (e) => {
      const ce = /** @type {CustomEvent<M[K]>} */ (e);
      listener(ce.detail, ce);
    };
    this.addEventListener(type, f, options);
    return () => this.removeEventListener(type, f, options);
  }

  /**
   * once resolves with the detail of the next event of type (that passes
   * filter, when given); the signal, if it fires first, rejects it.
   * @template {keyof M & string} K
   * @param {K} type
   * @param {{filter?: (detail: M[K]) => boolean, signal?: AbortSignal}} [o]
   * @returns {Promise<M[K]>}
   */
  once(type, o = {}) {
    return new Promise((resolve, reject) => {
      if (o.signal?.aborted) {
        reject(o.signal.reason);
        return;
      }
      const stopAbort = () => o.signal?.removeEventListener('abort', abort);
      const off = this.on(type, (d) => {
        if (o.filter && !o.filter(d)) return;
        off();
        stopAbort();
        resolve(d);
      });
      const abort = () => {
        off();
        reject(o.signal?.reason);
      };
      o.signal?.addEventListener('abort', abort, {once: true});
    });
  }

  /**
   * emit dispatches a CustomEvent of type with detail. A listener that
   * throws does not stop the others (EventTarget reports it).
   * @template {keyof M & string} K
   * @param {K} type
   * @param {M[K]} detail
   */
  emit(type, detail) {
    this.dispatchEvent(new CustomEvent(type, {detail}));
  }
}
