// Refreshes a view every `ms` until the page is left (its signal aborts); the first run is immediate.
export function every(ms, signal, run) {
  let timer;
  const tick = async () => {
    if (signal.aborted) return;
    await run();
    if (!signal.aborted) timer = setTimeout(tick, ms);
  };
  signal.addEventListener("abort", () => clearTimeout(timer));
  tick();
}
