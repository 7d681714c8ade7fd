// The browser's player of an animation (views/common/animation.py): Play, Pause, Step, Reset and a speed, a
// progress bar, the frame's numbers, and its charts, drawn by the Vega-Embed that ships with Streamlit and updated
// in place frame by frame. The page hears of the frame a visitor stopped on, not of every frame.

const PLAYERS = new Map();  // by the component's key: a page run may mount it in a new element

export default function (component) {
  const { data, parentElement, setStateValue, key } = component;
  let player = PLAYERS.get(key);
  if (!player) {
    player = new Player();
    PLAYERS.set(key, player);
  }
  if (player.root.parentNode !== parentElement) parentElement.appendChild(player.root);
  player.tell = (position) => setStateValue('position', position);
  // The page sends its document as JSON bytes, converted once per animation (views/common/animation.py).
  player.show(data instanceof Uint8Array ? JSON.parse(new TextDecoder().decode(data)) : data);
}

async function unpacked(base64) {
  const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  return new Response(stream).json();
}

// A series' columns as Vega's rows, each with the series' label (where it has one).
function rowsOf(columns, label) {
  const names = Object.keys(columns);
  const count = names.length ? columns[names[0]].length : 0;
  const rows = new Array(count);
  for (let i = 0; i < count; i++) {
    const row = label ? { series: label } : {};
    for (const name of names) row[name] = columns[name][i];
    rows[i] = row;
  }
  return rows;
}

// A dataset's rows: its series' rows, one series after another.
function rowsFrom(held) {
  const rows = [];
  for (const [label, columns] of held) rows.push(...rowsOf(columns, label));
  return rows;
}

// One series' columns after a frame's change, as symlab.specs.animation.after_change rebuilds them: rows added,
// all rows anew, or columns changed (their values, or whole steps of their rounding, sent as the steps' successive
// differences: (round(old × 10^d) + step) / 10^d).
function afterChange(columns, change) {
  if (change.append) {
    const grown = {};
    for (const [name, values] of Object.entries(change.append)) grown[name] = columns[name].concat(values);
    return grown;
  }
  if (change.rows) return change.rows;
  const result = { ...columns, ...(change.set || {}) };
  for (const [name, steps] of Object.entries(change.add || {})) {
    const scale = 10 ** steps.d, old = columns[name];
    let step = 0;  // the steps come as their successive differences
    result[name] = steps.v.map((difference, i) => (Math.round(old[i] * scale) + (step += difference)) / scale);
  }
  return result;
}

// Vega's fit leaves out all but one line of a y title on several lines: its text would start left of the chart.
// The chart moves right by as much as any text sticks out, and narrows by as much.
function keepTextInside(view, element) {
  const svg = element.querySelector('svg');
  if (!svg) return;
  const left = svg.getBoundingClientRect().left;
  let out = 0;
  for (const text of svg.querySelectorAll('text')) out = Math.max(out, left - text.getBoundingClientRect().left);
  if (out > 0.5) {
    element.style.paddingLeft = `${(parseFloat(element.style.paddingLeft) || 0) + Math.ceil(out) + 2}px`;
    view.width(widthOf(element)).runAsync();
  }
}

// The chart's room: its cell's width, less the room kept for text that would stick out.
// Streamlit's Vega theme (its spacing: 2, 8 and 16 px; a legend's rows as far apart as its), under which the page's
// other charts are drawn; the spec's own config wins, section by section.
const THEME = {
  title: { align: 'left', anchor: 'start', fontWeight: 600, orient: 'top', offset: 26 },
  axis: {
    ticks: false, domain: false, labelBound: false, labelLimit: 100,
    titlePadding: 16, labelPadding: 16, labelSeparation: 2, labelOverlap: true, titleFontWeight: 'normal',
  },
  legend: { titlePadding: 8, labelPadding: 16, columnPadding: 8, rowPadding: 5, padding: 8, titleFontWeight: 'normal' },
  axisX: { labelFlush: true, labelFlushOffset: 1 },  // not the y axis's: its end labels would meet their neighbours
  view: { stroke: 'transparent' },
};

function themed(font, config) {
  const merged = { font, ...THEME, ...config };
  for (const section of Object.keys(THEME)) merged[section] = { ...THEME[section], ...(config[section] || {}) };
  return merged;
}

const widthOf = (element) => Math.max(200, Math.floor(element.clientWidth - (parseFloat(element.style.paddingLeft) || 0)));

let vegaEmbed = null;

function loadVegaEmbed(chunk) {
  if (!vegaEmbed) {
    const main = document.querySelector('script[src*="static/js/index."]');
    const url = new URL(chunk, main ? main.src : new URL('static/js/', document.baseURI)).href;
    vegaEmbed = import(url).then((module) => {
      const load = Object.values(module).find((value) => typeof value === 'function');
      if (!load) throw new Error('the Vega-Embed loader exports no function');
      return load();
    });
  }
  return vegaEmbed;
}

// Material Symbols' shapes (24 × 24), drawn in the text's colour.
const icon = (path) => `<svg viewBox="0 0 24 24" width="20" height="20" aria-hidden="true"><path fill="currentColor" d="${path}"/></svg>`;
const ICONS = {
  play: icon('M8 5v14l11-7z'),
  pause: icon('M6 19h4V5H6v14zm8-14v14h4V5h-4z'),
  step: icon('M6 18l8.5-6L6 6v12zM16 6v12h2V6h-2z'),
  reset: icon('M12 5V1L7 6l5 5V7c3.31 0 6 2.69 6 6s-2.69 6-6 6-6-2.69-6-6H4c0 4.42 3.58 8 8 8s8-3.58 8-8-3.58-8-8-8z'),
};

class Player {
  constructor() {
    this.root = document.createElement('div');
    this.root.className = 'symlab-player';
    this.root.innerHTML = `
      <div class="bar" role="group" aria-label="Player">
        <button type="button" data-do="play">${ICONS.play}Play</button>
        <button type="button" data-do="pause">${ICONS.pause}Pause</button>
        <button type="button" data-do="step">${ICONS.step}Step</button>
        <button type="button" data-do="reset">${ICONS.reset}Reset</button>
        <label>Speed <select data-do="speed"></select></label>
      </div>
      <div class="progress" role="progressbar" aria-valuemin="0"><div></div></div>
      <div class="label" aria-live="off"></div>
      <div class="caption"></div>
      <div class="charts">Drawing the charts…</div>`;
    this.buttons = {};
    for (const button of this.root.querySelectorAll('button')) {
      this.buttons[button.dataset.do] = button;
      button.addEventListener('click', () => this[button.dataset.do]());
    }
    for (const name of ['play', 'pause', 'step', 'reset']) this.buttons[name].setAttribute('aria-label', name[0].toUpperCase() + name.slice(1));
    this.speed = this.root.querySelector('select');
    this.speed.addEventListener('change', () => { if (this.timer) this.schedule(); });
    this.frame = 0;
    this.timer = null;
    // What the charts hold at the frame shown, series by series (tests compare it with what the server encoded).
    this.root.heldData = () => ({
      frame: this.frame,
      charts: Object.fromEntries(Object.entries(this.series || {}).map(([chart, datasets]) => [chart,
        Object.fromEntries(Object.entries(datasets).map(([name, held]) => [name, Object.fromEntries(held)]))])),
    });
    this.id = null;
    this.views = [];
    this.observers = [];  // each chart's, refitting it to its cell
  }

  async show(data) {
    this.data = data;
    this.buttons.play.title = data.play_help || '';
    this.root.querySelector('.charts').style.setProperty('--columns', String(data.columns || 2));
    if (!this.speed.options.length) {
      for (const speed of data.speeds) this.speed.add(new Option(`${speed}×`, String(speed), speed === 1, speed === 1));
    }
    if (data.id === this.id) return;
    this.id = data.id;
    this.stop();
    const id = data.id;
    try {
      const [animation, embed] = await Promise.all([unpacked(data.animation), loadVegaEmbed(data.chunk)]);
      if (id !== this.id) return;  // newer settings came while this one loaded
      const start = Math.min(data.frame, animation.frames.length - 1);
      await this.build(animation, data.charts, embed, start);
      if (id !== this.id) return;
      this.goTo(start);
    } catch (error) {
      this.root.querySelector('.charts').textContent = `The charts could not be drawn (${error.message}).`;
    }
  }

  // The charts drawn at frame ``start`` (Vega sizes its scales by the first data it sees).
  async build(animation, charts, { embed, expressionInterpreter }, start) {
    this.animation = animation;
    this.charts = charts;
    this.series = null;
    this.datasetsAt(start);
    const shown = this.series;
    const holder = this.root.querySelector('.charts');
    for (const view of this.views) view.finalize();
    for (const observer of this.observers) observer.disconnect();
    this.observers = [];
    holder.replaceChildren();
    const font = getComputedStyle(document.body).fontFamily;
    this.views = await Promise.all(charts.map((chart) => {
      const element = document.createElement('div');
      element.className = 'chart';
      element.setAttribute('role', 'img');
      element.setAttribute('aria-label', chart.alt);
      element.dataset.chart = chart.name;
      holder.appendChild(element);
      const datasets = {};
      for (const [name, columns] of Object.entries(chart.static)) datasets[name] = rowsOf(columns, null);
      for (const [name, held] of Object.entries(shown[chart.name] || {})) datasets[name] = rowsFrom(held);
      // As wide as its cell, the axes and legend within, in the look of Streamlit's own charts (its theme's spacing
      // under the spec's own settings): refitted when the cell changes.
      const spec = { ...chart.spec, datasets, width: 'container', config: themed(font, chart.spec.config || {}) };
      // Laid out again at every frame (resize): a frame that widens the axis labels would push the title out.
      spec.autosize = { type: 'fit', contains: 'padding', ...(chart.spec.autosize || {}), resize: true };
      const options = { renderer: 'svg', actions: false, ast: true, expr: expressionInterpreter };
      return embed(element, spec, options).then((result) => {
        keepTextInside(result.view, element);
        const observer = new ResizeObserver(() => {
          const width = widthOf(element);
          if (width !== result.view.width()) result.view.width(width).runAsync();
        });
        observer.observe(element);
        this.observers.push(observer);
        return result.view;
      });
    }));
  }

  // Frame k's datasets, series by series, from the frame before (or from the first frame when going back).
  datasetsAt(k) {
    if (this.series === null || k < this.shown) {
      this.series = {};
      this.shown = -1;
    }
    const changed = new Set();
    for (let f = this.shown + 1; f <= k; f++) {
      for (const [chart, datasets] of Object.entries(this.animation.frames[f])) {
        for (const [name, changes] of Object.entries(datasets)) {
          const held = ((this.series[chart] ||= {})[name] ||= new Map());
          for (const [label, change] of Object.entries(changes)) {
            if (change === null) held.delete(label);
            else held.set(label, afterChange(held.get(label), change));
          }
          changed.add(`${chart}\u0000${name}`);
        }
      }
    }
    this.shown = k;
    return changed;
  }

  goTo(k) {
    this.frame = k;
    const changed = this.datasetsAt(k);
    this.charts.forEach((chart, i) => {
      const view = this.views[i];
      let touched = false;
      for (const [name, held] of Object.entries(this.series[chart.name] || {})) {
        if (!changed.has(`${chart.name}\u0000${name}`)) continue;
        view.data(name, rowsFrom(held));
        touched = true;
      }
      if (touched) view.runAsync();
    });
    const last = this.animation.frames.length - 1;
    const bar = this.root.querySelector('.progress');
    bar.setAttribute('aria-valuemax', String(last));
    bar.setAttribute('aria-valuenow', String(k));
    bar.firstElementChild.style.width = `${(100 * k) / Math.max(last, 1)}%`;
    this.root.querySelector('.label').textContent = this.animation.labels[k];
    this.root.querySelector('.caption').textContent = this.animation.captions[k];
    this.enable();
  }

  enable() {
    const last = this.animation ? this.animation.frames.length - 1 : 0;
    this.buttons.play.disabled = !!this.timer || last === 0;
    this.buttons.pause.disabled = !this.timer;
    this.buttons.step.disabled = this.frame >= last;
  }

  report() {
    this.tell({ id: this.id, frame: this.frame, playing: !!this.timer });
  }

  schedule() {
    clearInterval(this.timer);
    const speed = Number(this.speed.value) || 1;
    this.timer = setInterval(() => this.advance(), this.data.interval_ms / speed);
  }

  advance() {
    if (!this.root.isConnected) {  // between two page runs, or the visitor left the page
      this.away = (this.away || 0) + 1;
      if (this.away > 20) this.stop();
      return;
    }
    this.away = 0;
    const last = this.animation.frames.length - 1;
    if (this.frame >= last) { this.pause(); return; }
    this.goTo(this.frame + 1);
    if (this.frame >= last) this.pause();
  }

  play() {
    if (!this.animation || this.timer) return;
    if (this.frame >= this.animation.frames.length - 1) this.goTo(0);
    this.schedule();
    this.enable();
    this.report();
  }

  pause() {
    if (!this.timer) return;
    this.stop();
    this.enable();
    this.report();
  }

  step() {
    if (!this.animation) return;
    this.stop();
    if (this.frame < this.animation.frames.length - 1) this.goTo(this.frame + 1);
    this.enable();
    this.report();
  }

  reset() {
    if (!this.animation) return;
    this.stop();
    this.goTo(0);
    this.report();
  }

  stop() {
    clearInterval(this.timer);
    this.timer = null;
  }
}
