//! The report's "Compared with the baseline" section (`tprof report --baseline BASE`): the
//! headline of [`crate::compare::compare`], the step-time statement, the breakdown side by side,
//! and the verdicts that appeared, disappeared or changed.

use std::fmt::Write as _;

use super::html::esc;
use crate::compare::Comparison;
use crate::units::share;

pub fn section(h: &mut String, c: &Comparison, base: &str) {
    let _ = write!(
        h,
        "<section id=\"baseline\"><h2>Compared with the baseline</h2><p class=\"hint\">BASE: {}</p><p><b>{}</b></p><p>{}</p>",
        esc(base),
        esc(&c.headline),
        esc(&c.step_time.statement)
    );
    h.push_str("<table><thead><tr><th class=\"l\">category</th><th>BASE</th><th>NEW</th><th>BASE ms/step</th><th>NEW ms/step</th><th>change ms/step</th></tr></thead><tbody>");
    for p in &c.breakdown {
        let _ = write!(
            h,
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{:.3}</td><td>{:.3}</td><td><b>{:+.3}</b></td></tr>",
            p.category,
            share(p.base_share),
            share(p.new_share),
            p.base_ns_per_step / 1e6,
            p.new_ns_per_step / 1e6,
            p.change_ns_per_step / 1e6
        );
    }
    h.push_str("</tbody></table>");
    let v = &c.verdicts;
    if !(v.appeared.is_empty() && v.disappeared.is_empty() && v.changed.is_empty()) {
        h.push_str("<ul>");
        for (tag, list) in [("appeared", &v.appeared), ("disappeared", &v.disappeared), ("changed", &v.changed)] {
            for x in list {
                let sev = |s: Option<f64>| s.map(|s| format!("{s:.2}")).unwrap_or_else(|| "-".into());
                let _ = write!(
                    h,
                    "<li>{tag}: <b>{}</b> {} &rarr; {}: {}</li>",
                    esc(&x.kind),
                    sev(x.base_severity),
                    sev(x.new_severity),
                    esc(&x.summary)
                );
            }
        }
        h.push_str("</ul>");
    }
    h.push_str("</section>\n");
}
