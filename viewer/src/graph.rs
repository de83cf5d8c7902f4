//! The loadout graph as inline SVG: sockets as boxes in one row (entry first, then in the order
//! the edges reach them), forward edges arched above the row, edges back arched below it, and
//! every edge labelled with its condition and how often the cast took it. A taken edge is drawn
//! heavier (and solid), an untaken one thin and dashed, so the path shows without colour.

use maud::{Markup, html};

use crate::gather::Graph;

const BOX_W: u32 = 130;
const BOX_H: u32 = 54;
const STEP: u32 = 250;
const ROW_Y: u32 = 150;

fn center(index: usize) -> u32 {
    40 + u32::try_from(index)
        .unwrap_or(u32::MAX / STEP)
        .saturating_mul(STEP)
        + BOX_W / 2
}

/// The stroke width of an edge taken `taken` times: grows with the count, bounded.
fn weight(taken: u32) -> f64 {
    if taken == 0 {
        1.0
    } else {
        (2.0 + f64::from(taken).ln() * 1.5).min(8.0)
    }
}

/// The graph, with a picker that highlights the sockets one work item's path visits.
pub fn graph(graph: &Graph) -> Markup {
    let mut nodes: Vec<String> = graph.sockets.clone();
    if graph.edges.iter().any(|e| e.to == "end") {
        nodes.push("end".to_owned());
    }
    let index = |id: &str| nodes.iter().position(|n| n == id);
    let width = 80 + u32::try_from(nodes.len()).unwrap_or(0).saturating_mul(STEP);
    let height = ROW_Y * 2 + 40;
    let mut items: Vec<&String> = graph.items.values().flatten().collect();
    items.sort();
    items.dedup();
    // Edges between the same two boxes are spread apart.
    let mut seen: Vec<(usize, usize)> = Vec::new();
    html! {
        @if !items.is_empty() {
            p.noprint {
                label for="item-path" { "Highlight the path of work item " }
                select #item-path {
                    option value="" { "(all items)" }
                    @for item in &items { option value=(item) { (item) } }
                }
            }
        }
        svg.graph xmlns="http://www.w3.org/2000/svg" role="img"
            aria-label="loadout graph: sockets and edges with traversal counts"
            viewBox=(format!("0 0 {width} {height}")) {
            defs {
                marker #arrow viewBox="0 0 10 10" refX="9" refY="5" markerWidth="10"
                    markerHeight="10" markerUnits="userSpaceOnUse" orient="auto-start-reverse" {
                    path d="M 0 0 L 10 5 L 0 10 z" {}
                }
            }
            @for edge in &graph.edges {
                @if let (Some(i), Some(j)) = (index(&edge.from), index(&edge.to)) {
                    @let nth = { seen.push((i, j)); seen.iter().filter(|p| **p == (i, j)).count() };
                    @let (d, lx, ly) = path(i, j, nth);
                    @let label = format!("{} ×{}{}", edge.when, edge.taken,
                        if edge.configured { "" } else { " (exit)" });
                    g.edge-group data-from=(edge.from) data-to=(edge.to) data-taken=(edge.taken) {
                        title { (format!("{} -> {}: {label}", edge.from, edge.to)) }
                        path.edge.taken[edge.taken > 0].untaken[edge.taken == 0] d=(d)
                            stroke-width=(format!("{:.1}", weight(edge.taken)))
                            marker-end="url(#arrow)" {}
                        text x=(lx) y=(ly) text-anchor="middle" { (label) }
                    }
                }
            }
            @for (i, id) in nodes.iter().enumerate() {
                @let (label, visits) = graph.labels.get(id).cloned().unwrap_or_else(|| (String::new(), 0));
                @let of_items = graph.items.get(id).map(|v| v.join(" ")).unwrap_or_default();
                @let x = center(i) - BOX_W / 2;
                g.node.visited[visits > 0] data-socket=(id) data-items=(of_items) {
                    title { (format!("{id}: {label}, {visits} visits")) }
                    rect x=(x) y=(ROW_Y - BOX_H / 2) width=(BOX_W) height=(BOX_H) rx="6" {}
                    text x=(center(i)) y=(ROW_Y - 6) text-anchor="middle" font-weight="600" { (id) }
                    @if id != "end" {
                        text x=(center(i)) y=(ROW_Y + 12) text-anchor="middle" {
                            (label) " · " (visits) (if visits == 1 { " visit" } else { " visits" })
                        }
                    }
                }
            }
        }
    }
}

/// The SVG path of an edge from box `i` to box `j` (the `nth` between them) and where its
/// label goes.
fn path(i: usize, j: usize, nth: usize) -> (String, u32, u32) {
    let (x1, x2) = (center(i), center(j));
    let lift = 30 + 22 * u32::try_from(nth.saturating_sub(1)).unwrap_or(0);
    let top = ROW_Y - BOX_H / 2;
    let bottom = ROW_Y + BOX_H / 2;
    if j == i + 1 && nth == 1 {
        let (a, b) = (x1 + BOX_W / 2, x2 - BOX_W / 2);
        return (
            format!("M {a} {ROW_Y} L {b} {ROW_Y}"),
            (a + b) / 2,
            ROW_Y - 6,
        );
    }
    if i == j {
        let y = bottom + lift;
        return (
            format!(
                "M {} {bottom} C {} {y}, {} {y}, {} {bottom}",
                x1 - 20,
                x1 - 50,
                x1 + 50,
                x1 + 20
            ),
            x1,
            y + 4,
        );
    }
    let span = u32::try_from(i.abs_diff(j)).unwrap_or(1);
    let rise = (lift + 25 * span).min(ROW_Y - BOX_H / 2 - 20);
    if j > i {
        let y = top.saturating_sub(rise);
        (
            format!("M {x1} {top} C {x1} {y}, {x2} {y}, {x2} {top}"),
            (x1 + x2) / 2,
            y + rise / 4,
        )
    } else {
        let y = bottom + rise;
        (
            format!("M {x1} {bottom} C {x1} {y}, {x2} {y}, {x2} {bottom}"),
            (x1 + x2) / 2,
            y - rise / 4 + 4,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taken_edges_weigh_more_and_stay_bounded() {
        assert!(weight(0) < weight(1));
        assert!(weight(1) < weight(10));
        assert!(weight(1_000_000) <= 8.0);
    }

    #[test]
    fn a_back_edge_arches_below_the_row() {
        let (d, _, ly) = path(3, 1, 1);
        assert!(d.starts_with(&format!("M {} {}", center(3), ROW_Y + BOX_H / 2)));
        assert!(ly > ROW_Y);
    }
}
