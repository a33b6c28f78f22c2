/**
 * Charts as plain SVG: a line and a bar chart over hourly points, scaled to
 * their container (viewBox), with the latest value and the range as text.
 */
export interface Point {
  /** ms since the epoch */
  t: number;
  v: number;
}

const W = 320;
const H = 120;
const PAD = { l: 4, r: 4, t: 8, b: 16 };

function scale(points: Point[], extra: number[] = [], withZero = true, domain?: [number, number]) {
  const vs = [...points.map((p) => p.v), ...extra, ...(withZero || points.length === 0 ? [0] : [])];
  let min = Math.min(...vs);
  let max = Math.max(...vs);
  if (min === max) max = min + 1;
  const t0 = domain?.[0] ?? points[0]?.t ?? 0;
  const t1 = domain?.[1] ?? points[points.length - 1]?.t ?? t0 + 1;
  const x = (t: number) => PAD.l + ((t - t0) / Math.max(1, t1 - t0)) * (W - PAD.l - PAD.r);
  const y = (v: number) => PAD.t + (1 - (v - min) / (max - min)) * (H - PAD.t - PAD.b);
  return { x, y, min, max };
}

const hourLabel = (t: number) => new Date(t).toLocaleTimeString("en-GB", { hour: "2-digit", minute: "2-digit", hour12: false });
const compact = new Intl.NumberFormat("en-US", { notation: "compact", maximumFractionDigits: 2 });

function Frame({ title, summary, children, points, domain }: { title: string; summary: string; children: React.ReactNode; points: Point[]; domain?: [number, number] | undefined }) {
  const first = domain?.[0] ?? points[0]?.t;
  const last = domain?.[1] ?? points[points.length - 1]?.t;
  return (
    <figure className="chart">
      <figcaption>
        <span>{title}</span>
        <span className="chart-summary">{summary}</span>
      </figcaption>
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={`${title}: ${summary}`} preserveAspectRatio="none">
        {children}
        {first !== undefined && last !== undefined && (
          <>
            <text x={PAD.l} y={H - 3} className="axis">
              {hourLabel(first)}
            </text>
            <text x={W - PAD.r} y={H - 3} className="axis" textAnchor="end">
              {hourLabel(last)}
            </text>
          </>
        )}
      </svg>
    </figure>
  );
}

/** `withZero: false` scales to the values alone (a bankroll's small moves stay visible). */
export function LineChart({
  title,
  points,
  reference,
  referenceLabel,
  withZero = true,
  domain,
}: {
  title: string;
  points: Point[];
  reference?: number;
  referenceLabel?: string;
  withZero?: boolean;
  /** The time span drawn, when the points cover only part of it. */
  domain?: [number, number];
}) {
  const { x, y, min, max } = scale(points, reference === undefined ? [] : [reference], withZero, domain);
  const path = points.map((p, i) => `${i ? "L" : "M"}${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(" ");
  const last = points[points.length - 1]?.v;
  const summary = `now ${last === undefined ? "–" : compact.format(last)} · range ${compact.format(min)} to ${compact.format(max)}${reference !== undefined ? ` · ${referenceLabel ?? "reference"} ${compact.format(reference)}` : ""}`;
  return (
    <Frame title={title} summary={summary} points={points} domain={domain}>
      {min <= 0 && max >= 0 && <line x1={PAD.l} x2={W - PAD.r} y1={y(0)} y2={y(0)} className="zero" />}
      {reference !== undefined && <line x1={PAD.l} x2={W - PAD.r} y1={y(reference)} y2={y(reference)} className="reference" />}
      <path d={path} className="line" />
      {points.length === 1 && <circle cx={x(points[0]!.t)} cy={y(points[0]!.v)} r={2.5} className="dot" />}
    </Frame>
  );
}

export function BarChart({ title, points }: { title: string; points: Point[] }) {
  const { x, y } = scale(points);
  const step = points.length > 1 ? (W - PAD.l - PAD.r) / points.length : 10;
  const total = points.reduce((s, p) => s + p.v, 0);
  return (
    <Frame title={title} summary={`total ${compact.format(total)} · last hour ${compact.format(points[points.length - 1]?.v ?? 0)}`} points={points}>
      <line x1={PAD.l} x2={W - PAD.r} y1={y(0)} y2={y(0)} className="zero" />
      {points.map((p) => (
        <rect key={p.t} x={Math.min(x(p.t), W - PAD.r - step * 0.8)} width={Math.max(1, step * 0.8)} y={Math.min(y(p.v), y(0))} height={Math.abs(y(0) - y(p.v))} className="bar" />
      ))}
    </Frame>
  );
}
