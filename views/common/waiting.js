// A waiting panel drawn by the browser (views/common/computing.py): it asks the server where the page's computation
// stands (symlab/serving/waiting.py) twice a second and draws the bar and its words; once the computation is done,
// or the server no longer knows it (a restarted process), it runs the page again, which draws the result.

const WAITS = new Map();  // by the component's key: a page run may mount it in a new element

export default function (component) {
  const { data, parentElement, setStateValue, key } = component;
  let wait = WAITS.get(key);
  if (!wait) {
    wait = new Wait();
    WAITS.set(key, wait);
  }
  if (wait.root.parentNode !== parentElement) parentElement.appendChild(wait.root);
  wait.finished = (token) => setStateValue('done', token);
  wait.show(data instanceof Uint8Array ? JSON.parse(new TextDecoder().decode(data)) : data);
}

class Wait {
  constructor() {
    this.root = document.createElement('div');
    this.root.className = 'symlab-waiting';
    this.root.setAttribute('role', 'progressbar');
    this.root.setAttribute('aria-valuemin', '0');
    this.root.setAttribute('aria-valuemax', '100');
    this.text = document.createElement('div');
    this.text.className = 'text';
    this.bar = document.createElement('div');
    this.bar.className = 'bar';
    this.fill = document.createElement('div');
    this.bar.appendChild(this.fill);
    this.root.append(this.text, this.bar);
    this.token = null;
    this.timer = null;
  }

  show(document) {
    if (document.token === this.token) {  // a run that waits for the same computation: go on asking
      if (this.timer === null) this.schedule(0);
      return;
    }
    this.stop();
    this.token = document.token;
    this.url = document.url;
    this.interval = document.interval_ms;
    this.draw(document.fraction, document.text);
    this.schedule(this.interval);
  }

  draw(fraction, text) {
    const percent = Math.round(100 * Math.min(Math.max(fraction, 0), 1));
    this.fill.style.width = `${percent}%`;
    this.root.setAttribute('aria-valuenow', String(percent));
    this.root.setAttribute('aria-valuetext', text);
    this.text.textContent = text;
  }

  schedule(delay) {
    clearTimeout(this.timer);
    const token = this.token;
    this.timer = setTimeout(() => this.ask(token), delay);
  }

  stop() {
    clearTimeout(this.timer);
    this.timer = null;
  }

  async ask(token) {
    if (token !== this.token) return;
    if (!this.root.isConnected) {  // the page moved on: stop asking, so that the server drops what nobody awaits
      this.stop();
      return;
    }
    let answer = null;
    try {
      const response = await fetch(this.url, { cache: 'no-store', credentials: 'same-origin' });
      answer = response.status === 404 ? { done: true } : response.ok ? await response.json() : null;
    } catch (error) {
      answer = null;  // the server is out of reach a moment (restarting): ask again, a little later
    }
    if (token !== this.token) return;
    if (answer === null) {
      this.schedule(2 * this.interval);
      return;
    }
    if (answer.text) this.draw(answer.fraction, answer.text);
    if (answer.done) {
      this.stop();
      this.finished(token);
      return;
    }
    this.schedule(this.interval);
  }
}
