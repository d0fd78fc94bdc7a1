//! sharemap's rendering, in one place for every front end: charts, bars and heatmaps as
//! SVG (and PNG with the `png` feature), written whole (`plot`), the self-contained HTML
//! report (`html`), and a sharing matrix as rows of text (`text`). The command line,
//! `sharemap demo` and Python draw through it.

pub mod html;
pub mod plot;
pub mod text;
