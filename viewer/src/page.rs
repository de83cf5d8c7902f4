//! The page around every view: one self-contained HTML document (styles and script inline, no
//! request to anywhere), readable with the keyboard (every long list is a `details` element,
//! opened with Enter or Space) and printable (printing opens every list).

use maud::{DOCTYPE, Markup, PreEscaped, html};

/// The styles. Every state shown in colour is also written out (a label, a `+`/`-` prefix, a
/// dashed line), so colour is never the only signal.
const CSS: &str = r#"
:root { --fg: #1b1f24; --muted: #57606a; --line: #d0d7de; --bg: #ffffff; --soft: #f6f8fa;
  --add: #dafbe1; --del: #ffebe9; --warn: #fff8c5; --accent: #0969da; --bad: #cf222e; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg);
  background: var(--bg); margin: 0; }
header, main, footer { max-width: 1200px; margin: 0 auto; padding: 0 1rem; }
header { border-bottom: 1px solid var(--line); padding-top: .6rem; }
h1 { font-size: 1.4rem; margin: .4rem 0; } h2 { font-size: 1.15rem; margin-top: 1.6rem;
  border-bottom: 1px solid var(--line); } h3 { font-size: 1rem; }
nav a { margin-right: 1rem; } a { color: var(--accent); }
a:focus, summary:focus, button:focus, select:focus, input:focus, textarea:focus {
  outline: 3px solid var(--accent); outline-offset: 2px; }
table { border-collapse: collapse; width: 100%; } th, td { text-align: left; vertical-align: top;
  padding: .25rem .5rem; border-bottom: 1px solid var(--line); }
dl.summary { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
dl.summary dt { color: var(--muted); } dl.summary dd { margin: 0; overflow-wrap: anywhere; }
code, pre, .mono { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: 13px; }
pre { background: var(--soft); padding: .5rem; overflow-x: auto; white-space: pre-wrap;
  overflow-wrap: anywhere; margin: .3rem 0; }
details { border: 1px solid var(--line); border-radius: 4px; margin: .3rem 0; padding: 0 .5rem; }
details[open] { padding-bottom: .4rem; } summary { cursor: pointer; padding: .3rem 0; }
.tag { display: inline-block; border: 1px solid currentColor; border-radius: 3px;
  padding: 0 .3rem; font-size: 12px; margin-right: .3rem; text-transform: uppercase; }
.tag-repair, .tag-rejected { color: #9a6700; } .tag-rework { color: var(--bad); }
.tag-revive, .tag-resume, .tag-allowance { color: #1a7f37; } .tag-abort, .tag-failed,
.tag-exhausted { color: var(--bad); } .tag-claim, .tag-post { color: #8250df; }
.tag-fork { color: var(--accent); }
.ok { color: #1a7f37; } .bad { color: var(--bad); font-weight: 600; }
.reason { background: var(--warn); border-left: 4px double var(--bad); padding: .3rem .5rem; }
ol.lines { list-style: none; padding: 0; margin: .2rem 0; } ol.lines li { padding: 1px 0; }
.seq { color: var(--muted); display: inline-block; min-width: 4.5em; }
.kind { display: inline-block; min-width: 14em; }
.inherited { color: var(--muted); font-style: italic; }
.prompt { display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; }
.entry { border-left: 4px solid var(--line); padding-left: .5rem; margin: .4rem 0; }
.dest-system_fold { border-left-style: solid; } .dest-inline { border-left-style: dotted; }
.dest-trailing { border-left-style: double; border-left-color: var(--bad); }
.dest-dropped { border-left-style: dashed; opacity: .7; }
.finding { background: var(--warn); padding: .2rem .4rem; margin: .2rem 0; }
.msg-role { font-weight: 600; }
.status-same { color: var(--muted); } .status-changed { color: #9a6700; font-weight: 600; }
.status-only_a, .status-only_b { color: var(--bad); font-weight: 600; }
.first-divergence { outline: 3px double var(--bad); }
.marker { font-weight: 700; color: var(--bad); }
.diff-add { background: var(--add); display: block; } .diff-del { background: var(--del);
  display: block; } .diff-ctx { display: block; }
.sides { display: grid; grid-template-columns: 1fr 1fr; gap: 1rem; }
svg.graph { width: 100%; height: auto; border: 1px solid var(--line); background: var(--soft); }
svg .node rect { fill: #fff; stroke: var(--fg); stroke-width: 1.5; }
svg .node.visited rect { stroke-width: 3; } svg .node.dim { opacity: .25; }
svg .node.hl rect { stroke: var(--accent); stroke-width: 4; }
svg .edge { fill: none; stroke: var(--fg); } svg .edge.untaken { stroke-dasharray: 5 4;
  stroke: var(--muted); } svg text { font: 12px system-ui, sans-serif; fill: var(--fg); }
form.input textarea { width: 100%; min-height: 5em; }
.filter label { margin-right: 1rem; }
@media (max-width: 800px) { .prompt, .sides { grid-template-columns: 1fr; } }
@media print { nav, form, .noprint { display: none; } details { border: none; padding: 0; }
  body { font-size: 11pt; } pre { white-space: pre-wrap; } a { color: inherit; } }
"#;

/// The script: a packed list is inflated when first opened; printing opens every list; the
/// item picker highlights one work item's path; a live page lists new events.
const JS: &str = r#"
function unpack(d) {
  var packed = d.getAttribute('data-z');
  if (packed === null) return Promise.resolve();
  d.removeAttribute('data-z');
  var bin = atob(packed), bytes = new Uint8Array(bin.length);
  for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate-raw'));
  return new Response(stream).text().then(function (markup) {
    d.insertAdjacentHTML('beforeend', markup);
  });
}
document.addEventListener('toggle', function (e) {
  if (e.target.open && e.target.hasAttribute && e.target.hasAttribute('data-z')) unpack(e.target);
}, true);
window.addEventListener('beforeprint', function () {
  document.querySelectorAll('details[data-z]').forEach(unpack);
  document.querySelectorAll('details').forEach(function (d) { d.open = true; });
});
document.addEventListener('DOMContentLoaded', function () {
  var pick = document.getElementById('item-path');
  if (pick) pick.addEventListener('change', function () {
    var item = pick.value;
    document.querySelectorAll('svg .node').forEach(function (n) {
      var on = item === '' || (' ' + n.getAttribute('data-items') + ' ').indexOf(' ' + item + ' ') >= 0;
      n.classList.toggle('hl', item !== '' && on);
      n.classList.toggle('dim', item !== '' && !on);
    });
  });
  var live = document.body.getAttribute('data-live');
  if (live && window.EventSource) {
    var list = document.getElementById('live-events');
    var state = document.getElementById('live-state');
    var source = new EventSource(live);
    source.addEventListener('castlog', function (m) {
      var e = JSON.parse(m.data);
      var li = document.createElement('li');
      li.textContent = e.seq + '  ' + e.kind + '  ' + e.summary;
      list.appendChild(li);
      if (state) state.textContent = 'new events: reload the page to see them in place';
    });
  }
});
"#;

/// A whole page: `title`, the navigation links, and `body`. `live` is the URL of the server
/// sent events a page listens to while its cast runs (`serve` only).
pub fn page(title: &str, nav: &[(&str, String)], live: Option<&str>, body: &Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) }
                style { (PreEscaped(CSS)) }
                script { (PreEscaped(JS)) }
            }
            body data-live=[live] {
                header {
                    h1 { (title) }
                    @if !nav.is_empty() {
                        nav aria-label="sections" {
                            @for (label, href) in nav {
                                a href=(href) { (label) }
                            }
                        }
                    }
                }
                main { (body) }
                footer { p.noprint { small { "castlog report, read from the log" } } }
            }
        }
    }
}
