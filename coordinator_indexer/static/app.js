// The leaderboard page: fetches the indexer's JSON API and renders stats, the table and an SVG
// chart of reward over rounds. No framework and no build step; refreshes every few seconds
// (?refresh=N seconds, 0 to stop). Rewards are sums: a batch's is the sum over its completions, a
// peer's the sum over its batches. A pending round or batch (its outcome can still change) is
// shown as pending: a gap in the verified lines under a "pending" band, "pending" in the tables.
"use strict";

const params = new URLSearchParams(location.search);
const REFRESH_S = Number(params.get("refresh") ?? 5);
const PAGE_SIZE = Math.min(500, Math.max(1, Number(params.get("limit") ?? 25)));
const SVG_NS = "http://www.w3.org/2000/svg";

const view = { sort: "rank", order: null, offset: 0, total: 0, selected: params.get("peer") };

const $ = (id) => document.getElementById(id);

async function getJSON(path) {
  const response = await fetch(path, { cache: "no-store" });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.detail || `${path}: HTTP ${response.status}`);
  return body;
}

function fmtReward(value) {
  if (value === null || value === undefined) return "–";
  return value.toLocaleString(undefined, { minimumFractionDigits: 3, maximumFractionDigits: 3 });
}

function fmtEth(value) {
  return value.toLocaleString(undefined, { maximumFractionDigits: 4 });
}

function shortAddress(address) {
  return `${address.slice(0, 8)}…${address.slice(-6)}`;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

// ------------------------------------------------------------------------------------- health

async function renderHealth() {
  const pill = $("health");
  try {
    const response = await fetch("/health", { cache: "no-store" });
    const health = await response.json();
    pill.className = `pill ${health.status}`;
    const words = {
      ok: "live",
      catching_up: "catching up",
      starting: "starting",
      error: "indexing stopped",
    };
    const lag = health.lag_blocks === null ? "" : ` · ${health.lag_blocks} blocks behind`;
    pill.textContent = `${words[health.status] || health.status}${lag}`;
    pill.title = health.error || `indexed to block ${health.indexed_block}, final to ${health.final_block}`;
  } catch (error) {
    pill.className = "pill error";
    pill.textContent = "indexer unreachable";
  }
}

// -------------------------------------------------------------------------------------- stats

async function renderStats() {
  const stats = await getJSON("/api/stats");
  const cards = [
    ["active peers", stats.active_peers.toLocaleString(), `of ${stats.peers} registered`],
    ["rounds", stats.rounds.toLocaleString(), stats.current_round === null ? "" : `chain is in round ${stats.current_round}`],
    ["batches", stats.batches.toLocaleString(), `${stats.verdicts_counted.toLocaleString()} committee verdicts`],
    ["verified share", `${(100 * stats.verified_share).toFixed(1)} %`,
      `${stats.verified_batches} of ${stats.batches} batches · ${stats.pending_batches} pending`],
    ["verified reward", fmtReward(stats.verified_reward), `claimed ${fmtReward(stats.claimed_reward)}`],
    ["total stake", `${fmtEth(Number(BigInt(stats.total_stake_wei) / 10n ** 12n) / 1e6)} ETH`, `${stats.slashes} slashes`],
  ];
  $("stats").replaceChildren(
    ...cards.map(([label, value, note]) =>
      el("div", { class: "card", "data-stat": label },
        el("div", { class: "label" }, label),
        el("div", { class: "value" }, value),
        el("div", { class: "label" }, note)))
  );
  $("chain").textContent = `chain ${stats.chain_id} · coordinator ${stats.coordinator} · indexed to block ${stats.indexed_block}`;
}

// -------------------------------------------------------------------------------------- table

async function renderBoard() {
  const query = new URLSearchParams({ limit: PAGE_SIZE, offset: view.offset, sort: view.sort });
  if (view.order) query.set("order", view.order);
  const board = await getJSON(`/api/leaderboard?${query}`);
  view.total = board.total;
  view.order = board.order;
  const rows = board.entries.map((peer) => {
    const nameCell = el("td", { class: "name" }, peer.name);
    if (peer.status !== "active") nameCell.append(el("span", { class: `badge ${peer.status}` }, peer.status));
    nameCell.append(el("div", { class: "addr", title: peer.address }, shortAddress(peer.address)));
    const row = el("tr", { "data-address": peer.address },
      el("td", { class: "num rank" }, String(peer.rank)),
      nameCell,
      el("td", { class: "num verified" }, fmtReward(peer.verified_reward)),
      el("td", { class: "num claimed" }, fmtReward(peer.claimed_reward)),
      el("td", { class: "num rounds" }, `${peer.rounds}`),
      el("td", { class: "num stake" }, fmtEth(peer.stake_eth)),
      el("td", { class: `num slashes${peer.slashes ? " slashed" : ""}` }, String(peer.slashes)),
      el("td", { class: "num duty-done", title: `${peer.duty_seats} seats held` }, String(peer.duty_done)),
      el("td", { class: `num duty-missed${peer.duty_missed ? " missed" : ""}` }, String(peer.duty_missed)),
      pendingCell(peer.pending_batches));
    if (peer.address === view.selected) row.classList.add("selected");
    row.addEventListener("click", () => selectPeer(peer.address));
    return row;
  });
  if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: "10", class: "muted" }, "no peers registered yet")));
  $("rows").replaceChildren(...rows);
  for (const th of document.querySelectorAll("th[data-sort]")) {
    th.classList.toggle("sorted", th.dataset.sort === view.sort);
    th.classList.toggle("asc", th.dataset.sort === view.sort && view.order === "asc");
  }
  const last = Math.min(view.offset + PAGE_SIZE, view.total);
  $("page").textContent = view.total ? `${view.offset + 1}–${last} of ${view.total}` : "";
  $("prev").disabled = view.offset === 0;
  $("next").disabled = last >= view.total;
}

// How many of a peer's batches are pending: their verified reward is no verdict yet.
function pendingCell(count) {
  if (!count) return el("td", { class: "num pending-batches" }, "–");
  return el("td", { class: "num pending-batches pending", title: "outcome not settled yet: the verified reward of these batches can still change" },
    `${count} pending`);
}

function selectPeer(address) {
  view.selected = view.selected === address ? null : address;
  for (const row of document.querySelectorAll("#rows tr")) {
    row.classList.toggle("selected", row.dataset.address === view.selected);
  }
  renderChart().catch(showError);
}

// -------------------------------------------------------------------------------------- chart

async function renderChart() {
  const rounds = await getJSON("/api/rounds?limit=500&order=desc");
  const swarm = rounds.entries.slice().reverse();
  const pending = swarm.filter((r) => r.pending).map((r) => r.round);
  const series = [
    {
      // a pending round has no verdict yet: a gap (null), not a 0
      label: "swarm: verified per batch",
      color: "var(--accent)",
      points: swarm.map((r) => [r.round, r.pending ? null : r.publications ? r.verified_reward / r.publications : 0]),
    },
    {
      label: "swarm: claimed per batch",
      color: "var(--accent2)",
      dashed: true,
      points: swarm.map((r) => [r.round, r.publications ? r.claimed_reward / r.publications : 0]),
    },
  ];
  let peerNote = "click a peer in the table to compare";
  $("batches-panel").hidden = !view.selected;
  if (view.selected) {
    try {
      const peer = await getJSON(`/api/peers/${view.selected}`);
      peerNote = `selected: ${peer.name} (rank ${peer.rank})`;
      renderBatches(peer);
      series.push(
        {
          label: `${peer.name}: verified`,
          color: "var(--peer)",
          points: peer.batches.filter((b) => b.verified_in_range || b.pending)
            .map((b) => [b.round, b.pending ? null : b.verified_reward]),
        },
        {
          label: `${peer.name}: claimed`,
          color: "var(--peer2)",
          dashed: true,
          points: peer.batches.filter((b) => b.claimed_in_range).map((b) => [b.round, b.claimed_reward]),
        }
      );
    } catch (error) {
      peerNote = error.message;
    }
  }
  $("chart-peer").textContent = peerNote;
  drawChart($("chart"), series, pending);
  const legend = series.map((s) =>
    el("span", {}, el("i", { style: `background:${s.color}${s.dashed ? ";opacity:.6" : ""}` }), s.label));
  if (pending.length) {
    legend.push(el("span", { class: "pending-legend" }, el("i", { class: "pending-swatch" }),
      "pending: outcome not settled yet, no verified reward drawn"));
  }
  $("legend").replaceChildren(...legend);
}

// ------------------------------------------------------------------------ the selected peer's batches

function weightEth(wei) {
  return fmtEth(Number(BigInt(wei) / 10n ** 12n) / 1e6);
}

function outcomeText(batch) {
  if (batch.pending) return batch.flags ? "pending: flagged, awaiting settlement" : "pending: committee still judging";
  if (batch.outcome === "upheld") return "upheld (slashed)";
  if (batch.outcome === "rejected") return "flags rejected";
  if (batch.outcome === "inconclusive") return "inconclusive (no reward)";
  if (batch.flags) return "flagged, not settled";
  if (batch.verdicts_counted) return "agreed";
  return "no committee vote";
}

// A reward outside [0, the batch maximum] is shown as it is, marked, and counts nowhere.
function rewardCell(value, inRange, max, extra = "") {
  if (inRange !== false) return el("td", { class: `num ${extra}` }, fmtReward(value));
  return el("td", { class: `num ${extra} out-of-range`, title: `out of range [0, ${fmtReward(max)}]: not counted` },
    `${fmtReward(value)} ⚠`);
}

// A pending batch's verified reward is no verdict yet: "pending", with what was revealed so far.
function verifiedCell(batch) {
  if (!batch.pending) return rewardCell(batch.verified_reward, batch.verified_in_range, batch.reward_max, "verified");
  const sofar = batch.verified_reward === null ? "no verdict revealed yet" : `so far ${fmtReward(batch.verified_reward)}`;
  return el("td", { class: "num verified pending", title: `outcome not settled yet (${sofar})` }, "pending");
}

function renderBatches(peer) {
  $("batches-peer").textContent = peer.name;
  const rows = peer.batches.slice().reverse().map((b) =>
    el("tr", { "data-round": String(b.round), "data-pending": String(b.pending) },
      el("td", { class: "num" }, String(b.round)),
      rewardCell(b.claimed_reward, b.claimed_in_range, b.reward_max),
      verifiedCell(b),
      el("td", { class: "num agree-weight" }, weightEth(b.agree_weight_wei)),
      el("td", { class: "num flag-weight" }, weightEth(b.flag_weight_wei)),
      el("td", { class: "num" }, `${b.agreements} agree · ${b.flags} flag${b.ignored ? ` · ${b.ignored} ignored` : ""}${b.evidence ? ` · ${b.evidence} provenance evidence` : ""}`),
      el("td", { class: `outcome ${b.pending ? "pending" : b.outcome || ""}` }, outcomeText(b))));
  if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: "7", class: "muted" }, "no batches yet")));
  $("batch-rows").replaceChildren(...rows);
}

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function niceTicks(low, high, count) {
  const span = high - low || 1;
  const step0 = span / count;
  const magnitude = 10 ** Math.floor(Math.log10(step0));
  const step = [1, 2, 5, 10].map((m) => m * magnitude).find((s) => s >= step0);
  const ticks = [];
  for (let v = Math.ceil(low / step) * step; v <= high + 1e-9; v += step) ticks.push(+v.toFixed(10));
  return ticks;
}

// Consecutive pending rounds as [first, last] runs.
function runsOf(rounds) {
  const runs = [];
  for (const r of rounds) {
    const last = runs[runs.length - 1];
    if (last && r === last[1] + 1) last[1] = r;
    else runs.push([r, r]);
  }
  return runs;
}

// One band per run of pending rounds, under the lines: no verdict there yet, so no verified point.
function drawPending(root, pendingRounds, x, bounds) {
  for (const [first, last] of runsOf(pendingRounds)) {
    const x0 = Math.max(bounds.left, x(first - 0.5)), x1 = Math.min(bounds.right, x(last + 0.5));
    const band = svg("rect", {
      x: x0, y: bounds.top, width: Math.max(2, x1 - x0), height: bounds.bottom - bounds.top,
      class: "pending-band", "data-pending": first === last ? `${first}` : `${first}-${last}`,
    });
    const which = first === last ? `round ${first}` : `rounds ${first}-${last}`;
    band.append(svg("title", {}, `${which}: pending, the committee's outcome is not settled yet`));
    root.append(band);
    root.append(svg("text", { x: (x0 + x1) / 2, y: bounds.top + 12, "text-anchor": "middle", class: "pending-label" }, "pending"));
  }
}

// A series' line; a null value (pending) breaks it.
function linePath(points, x, y) {
  let pen = false;
  const parts = [];
  for (const [px, py] of points) {
    if (py === null) { pen = false; continue; }
    parts.push(`${pen ? "L" : "M"}${x(px).toFixed(1)},${y(py).toFixed(1)}`);
    pen = true;
  }
  return parts.join(" ");
}

function drawChart(container, series, pendingRounds = []) {
  const width = 1000, height = 260, left = 56, right = 16, top = 12, bottom = 30;
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none" });
  const all = series.flatMap((s) => s.points).filter((p) => p[1] !== null);
  if (!all.length) {
    root.append(svg("text", { x: width / 2, y: height / 2, "text-anchor": "middle", class: "empty" }, "no rounds yet"));
    container.replaceChildren(root);
    return;
  }
  const xs = [...all.map((p) => p[0]), ...pendingRounds], ys = all.map((p) => p[1]);
  const xMin = Math.min(...xs), xMax = Math.max(...xs);
  const yMin = Math.min(0, ...ys), yMax = Math.max(...ys, 1e-9);
  const x = (v) => left + ((v - xMin) / (xMax - xMin || 1)) * (width - left - right);
  const y = (v) => top + (1 - (v - yMin) / (yMax - yMin || 1)) * (height - top - bottom);
  for (const t of niceTicks(yMin, yMax, 5)) {
    root.append(svg("line", { x1: left, x2: width - right, y1: y(t), y2: y(t), class: "axis" }));
    root.append(svg("text", { x: left - 6, y: y(t) + 4, "text-anchor": "end", class: "tick" }, fmtTick(t)));
  }
  const xTicks = niceTicks(xMin, xMax, Math.min(10, xMax - xMin || 1)).filter(Number.isInteger);
  for (const t of xTicks) {
    root.append(svg("text", { x: x(t), y: height - 10, "text-anchor": "middle", class: "tick" }, `r${t}`));
  }
  drawPending(root, pendingRounds, x, { left, right: width - right, top, bottom: height - bottom });
  for (const s of series) {
    const path = linePath(s.points, x, y);
    if (!path) continue;
    root.append(svg("path", {
      d: path, fill: "none", stroke: s.color, "stroke-width": 2.5,
      "stroke-dasharray": s.dashed ? "6 5" : "none", "vector-effect": "non-scaling-stroke",
      "data-series": s.label,
    }));
    for (const p of s.points.filter((q) => q[1] !== null)) {
      const dot = svg("circle", { cx: x(p[0]), cy: y(p[1]), r: 3, fill: s.color });
      dot.append(svg("title", {}, `${s.label} · round ${p[0]}: ${fmtReward(p[1])}`));
      root.append(dot);
    }
  }
  container.replaceChildren(root);
}

function fmtTick(value) {
  return Math.abs(value) >= 1000 ? `${(value / 1000).toFixed(1)}k` : `${+value.toFixed(2)}`;
}

// ------------------------------------------------------------------------------------ refresh

function showError(error) {
  $("updated").textContent = `update failed: ${error.message}`;
}

async function refresh() {
  await renderHealth();
  try {
    await Promise.all([renderStats(), renderBoard(), renderChart()]);
    $("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
    document.body.dataset.loaded = "true";
  } catch (error) {
    showError(error);
  }
}

for (const th of document.querySelectorAll("th[data-sort]")) {
  th.addEventListener("click", () => {
    if (view.sort === th.dataset.sort) view.order = view.order === "asc" ? "desc" : "asc";
    else { view.sort = th.dataset.sort; view.order = null; }
    view.offset = 0;
    renderBoard().catch(showError);
  });
}
$("prev").addEventListener("click", () => { view.offset = Math.max(0, view.offset - PAGE_SIZE); renderBoard().catch(showError); });
$("next").addEventListener("click", () => { view.offset += PAGE_SIZE; renderBoard().catch(showError); });

refresh();
if (REFRESH_S > 0) setInterval(refresh, REFRESH_S * 1000);
