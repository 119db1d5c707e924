// The live loss chart: uPlot (vendored from npm into dist/vendor by `cargo xtask build-web`).
// Points arrive in step order; a validation loss may come for a step already plotted.

import uPlot from '../vendor/uplot/uPlot.esm.js';

/** The fewest milliseconds between two redraws of the chart. */
const REDRAW_MS = 250;

export class LossChart {
  constructor(container) {
    this.container = container;
    this.steps = [];
    this.train = [];
    this.val = [];
    this.index = new Map();
    this.pending = false;
    this.lastDraw = -Infinity;
    this.plot = new uPlot(this.options(), [[], [], []], container);
    new ResizeObserver(() => this.resize()).observe(container);
    this.warmUp();
  }

  /**
   * Draws a hidden throwaway line once at page load. uPlot's first draw with data runs its
   * axis and path code for the first time (10 to 25 ms of main-thread work, several times
   * that on a busy machine); without this it lands on the first losses, while the worker's
   * threads keep every core busy.
   */
  warmUp() {
    this.container.style.visibility = 'hidden';
    this.plot.setData([[0, 1], [1, 0], [0, 1]]);
    requestAnimationFrame(() => {
      this.container.style.visibility = '';
      if (!this.pending) this.plot.setData([this.steps, this.train, this.val]);
    });
  }

  options() {
    return {
      width: Math.max(300, this.container.clientWidth),
      height: 300,
      scales: { x: { time: false } },
      axes: [
        { label: 'step', stroke: '#6b7489', grid: { stroke: '#eef0f5' } },
        { label: 'loss', stroke: '#6b7489', grid: { stroke: '#eef0f5' }, size: 56 },
      ],
      series: [
        { label: 'step' },
        { label: 'train loss', stroke: '#4f46e5', width: 1.5, points: { show: false }, value: (_, v) => (v == null ? '—' : v.toFixed(4)) },
        { label: 'val loss', stroke: '#06b6d4', width: 2, spanGaps: true, points: { show: true, size: 6, fill: '#06b6d4' }, value: (_, v) => (v == null ? '—' : v.toFixed(4)) },
      ],
      legend: { live: true },
      cursor: { drag: { x: true, y: false } },
    };
  }

  resize() {
    const width = Math.max(300, this.container.clientWidth);
    if (width !== this.plot.width) this.plot.setSize({ width, height: 300 });
  }

  clear() {
    this.steps = [];
    this.train = [];
    this.val = [];
    this.index.clear();
    this.redraw();
  }

  /** @param {{step: number, trainLoss: number, valLoss?: number}[]} points */
  add(points) {
    for (const p of points) {
      const at = this.index.get(p.step);
      if (at !== undefined) {
        if (p.valLoss != null) this.val[at] = p.valLoss;
        continue;
      }
      // Steps only grow within a run; anything older (a reload's overlap) is dropped.
      if (this.steps.length && p.step < this.steps[this.steps.length - 1]) continue;
      this.index.set(p.step, this.steps.length);
      this.steps.push(p.step);
      this.train.push(p.trainLoss);
      this.val.push(p.valLoss ?? null);
    }
    this.redraw();
  }

  get length() {
    return this.steps.length;
  }

  /**
   * Coalesces redraws to one per animation frame and at most one per `REDRAW_MS`, so the main
   * thread stays light and the machine's cores are left to the worker (see app.js's
   * `PROGRESS_RENDER_MS`).
   */
  redraw() {
    if (this.pending) return;
    this.pending = true;
    const wait = Math.max(0, this.lastDraw + REDRAW_MS - performance.now());
    setTimeout(() => {
      requestAnimationFrame(() => {
        this.pending = false;
        this.lastDraw = performance.now();
        this.plot.setData([this.steps, this.train, this.val]);
      });
    }, wait);
  }
}
