import cliProgress from 'cli-progress';

/**
 * Progress of a long command on stderr (stdout stays for its result): a bar with the events done,
 * the rate and the time left when stderr is a terminal; otherwise a plain line every few seconds
 * and at each change of phase, so that logs and CI output stay readable.
 */
export interface Progress {
  update(phase: string, done: number, total: number): void;
  stop(): void;
}

const LINE_INTERVAL_MS = 2_000;

/** `unit`: what is counted (`events`, or an import's `rows`). */
export function progressOnStderr(label: string, unit = 'events'): Progress {
  const started = performance.now();
  let phase = '';
  let lastLine = 0;
  const rate = (done: number) => Math.round(done / Math.max(0.001, (performance.now() - started) / 1000));
  if (process.stderr.isTTY) {
    const bar = new cliProgress.SingleBar(
      {
        stream: process.stderr,
        format: `${label} {phase} [{bar}] {percentage}% | {value}/{total} ${unit} | {rate} ${unit}/s | ETA {eta_formatted}`,
        hideCursor: true,
        etaBuffer: 50,
        fps: 5,
      },
      cliProgress.Presets.shades_classic,
    );
    let running = false;
    return {
      update(next, done, total) {
        const payload = { phase: next.padEnd(11), rate: rate(done).toLocaleString('en-US') };
        if (!running) {
          bar.start(Math.max(total, 1), done, payload);
          running = true;
        } else {
          bar.setTotal(Math.max(total, 1));
          bar.update(done, payload);
        }
      },
      stop() {
        if (running) bar.stop();
        running = false;
      },
    };
  }
  return {
    update(next, done, total) {
      const now = performance.now();
      if (next === phase && now - lastLine < LINE_INTERVAL_MS) return;
      phase = next;
      lastLine = now;
      const perSecond = rate(done);
      const left = perSecond > 0 && total > done ? `, about ${Math.ceil((total - done) / perSecond)} s left` : '';
      const share = total > 0 ? ` (${Math.floor((done / total) * 100)}%)` : '';
      process.stderr.write(`${label}: ${next}, ${done.toLocaleString('en-US')} of ${total.toLocaleString('en-US')} ${unit}${share}, ${perSecond.toLocaleString('en-US')} ${unit}/s${left}\n`);
    },
    stop() {},
  };
}
