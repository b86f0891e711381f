// Inline SVG drawn by the console itself: a line chart over time and a horizontal bar.

const COLORS = ["#2f5fd0", "#d0652f", "#2e8b57", "#8e44ad", "#c0392b", "#16a085", "#b7950b", "#34495e",
  "#e67e22", "#1abc9c", "#7f8c8d", "#9b59b6"];

export function color(i) { return i < 0 ? "#e6e9ef" : COLORS[i % COLORS.length]; }

// A stable colour for a name (a consumer keeps its colour from page to page).
export function colorOf(name) {
  if (name === "other") return "#9aa3b2";
  let h = 0;
  for (const c of name) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return `hsl(${h % 360} 55% 45%)`;
}

// series: [{name, color, points: [[t, v], ...]}]
export function lineChart(series, { width = 640, height = 180, title = "" } = {}) {
  const pad = { l: 44, r: 10, t: 18, b: 22 };
  const all = series.flatMap((s) => s.points);
  if (!all.length) return `<svg class="chart" width="${width}" height="${height}"><text x="10" y="20">no samples yet</text></svg>`;
  let t0 = Math.min(...all.map((p) => p[0])), t1 = Math.max(...all.map((p) => p[0]));
  if (t1 === t0) t0 = t1 - 60;
  const vmax = Math.max(1, ...all.map((p) => p[1]));
  const x = (t) => pad.l + ((t - t0) / (t1 - t0)) * (width - pad.l - pad.r);
  const y = (v) => height - pad.b - (v / vmax) * (height - pad.t - pad.b);
  const lines = series.map((s) => {
    const d = s.points.map((p, i) => `${i ? "L" : "M"}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join("");
    const dot = s.points.length === 1 ? `<circle cx="${x(s.points[0][0])}" cy="${y(s.points[0][1])}" r="3" fill="${s.color}"/>` : "";
    return `<path d="${d}" fill="none" stroke="${s.color}" stroke-width="1.8"/>${dot}`;
  }).join("");
  const time = (t) => new Date(t * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  const legend = series.map((s, i) => `<text x="${pad.l + i * 110}" y="12" font-size="11" fill="${s.color}">■ ${s.name}</text>`).join("");
  return `<svg class="chart" width="${width}" height="${height}" role="img" aria-label="${title}">
    ${legend}
    <line x1="${pad.l}" y1="${y(0)}" x2="${width - pad.r}" y2="${y(0)}" stroke="#ccd"/>
    <text x="4" y="${y(vmax) + 4}" font-size="10">${vmax}</text><text x="4" y="${y(0)}" font-size="10">0</text>
    <text x="${pad.l}" y="${height - 6}" font-size="10">${time(t0)}</text>
    <text x="${width - pad.r - 34}" y="${height - 6}" font-size="10">${time(t1)}</text>
    ${lines}</svg>`;
}

// One consumer's line as a bar: held (owned part dark, borrowed light), with marks for what it
// owns (|), deserves (▼) and demands (dashed end).
export function shareBar({ owned, deserved, held, borrowed, demand }, scale, width = 260) {
  const w = (v) => Math.max(0, Math.min(width, (v / scale) * width));
  const ownHeld = Math.max(0, held - borrowed);
  return `<svg class="bar" width="${width}" height="16">
    <rect x="0" y="3" width="${w(Math.max(demand, held))}" height="10" fill="none" stroke="#c77700" stroke-dasharray="3 2"/>
    <rect x="0" y="3" width="${w(ownHeld)}" height="10" fill="#2f5fd0"/>
    <rect x="${w(ownHeld)}" y="3" width="${w(borrowed)}" height="10" fill="#8fb0ff"/>
    <line x1="${w(owned)}" y1="0" x2="${w(owned)}" y2="16" stroke="#1d2430" stroke-width="2"/>
    <path d="M${w(deserved) - 4},0 L${w(deserved) + 4},0 L${w(deserved)},6 Z" fill="#2e8b57"/>
  </svg>`;
}

// What is held of one kind over what there is: a filled bar (red past the total).
export function kindBar(used, total, width = 100) {
  const f = total > 0 ? Math.min(1, used / total) : 0;
  const over = total > 0 && used > total + 1e-9;
  const title = `${+used.toFixed(3)} of ${+total.toFixed(3)}${total > 0 ? ` (${(100 * used / total).toFixed(1)}%)` : ""}`;
  return `<svg class="bar kindbar" width="${width}" height="12" role="img" aria-label="${title}"><title>${title}</title>
    <rect x="0" y="1" width="${width}" height="10" fill="#e6e9ef"/>
    <rect x="0" y="1" width="${(f * width).toFixed(1)}" height="10" fill="${over ? "#c0392b" : "#2f5fd0"}" data-fill="${f.toFixed(4)}"/></svg>`;
}

// A host's GPUs as squares, each filled by the part of it that running activities hold
// (parts: {index: part}, 1 a whole GPU).
export function gpuCells(n, parts) {
  n = Math.floor(n || 0);
  if (!n) return '<span class="muted">–</span>';
  const cells = [];
  for (let i = 0; i < n; i++) {
    const p = Math.min(1, Number((parts || {})[String(i)] || 0));
    cells.push(`<g data-gpu="${i}" data-part="${p}"><title>GPU ${i}: ${+(100 * p).toFixed(1)}% held</title>
      <rect x="${i * 14}" y="1" width="12" height="12" fill="#e6e9ef" stroke="#99a"/>
      <rect x="${i * 14}" y="${1 + 12 * (1 - p)}" width="12" height="${12 * p}" fill="#2e8b57"/></g>`);
  }
  return `<svg class="gpus" width="${n * 14}" height="14" role="img" aria-label="${n} GPUs">${cells.join("")}</svg>`;
}
