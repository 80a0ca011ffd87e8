//! Writing a bench run: `report.json`, SVG charts, and a table for people.

use std::path::Path;

use plotters::prelude::*;

use crate::harness::{BenchError, BenchReport, WorkloadResult, io};

/// Writes `report.json` and one SVG chart per workload into the run's `out` directory; returns the
/// files written.
pub fn write(report: &BenchReport) -> Result<Vec<std::path::PathBuf>, BenchError> {
    let out = &report.options.out;
    let json = serde_json::to_vec_pretty(report)
        .map_err(|e| BenchError::Chart(format!("report does not encode: {e}")))?;
    let report_path = out.join("report.json");
    std::fs::write(&report_path, json).map_err(io(format!("cannot write {}", report_path.display())))?;
    let mut written = vec![report_path];
    let charts = out.join("charts");
    std::fs::create_dir_all(&charts).map_err(io(format!("cannot create {}", charts.display())))?;
    for workload in &report.workloads {
        let path = charts.join(format!("{}.svg", workload.name));
        bar_chart(&path, workload)?;
        written.push(path);
    }
    Ok(written)
}

/// Two bars, Mnemo and what it is compared with, with the unit on the axis.
fn bar_chart(path: &Path, workload: &WorkloadResult) -> Result<(), BenchError> {
    let chart_error = |e: String| BenchError::Chart(format!("{}: {e}", path.display()));
    let root = SVGBackend::new(path, (720, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| chart_error(e.to_string()))?;
    let top = workload.mnemo.max(workload.baseline).max(f64::MIN_POSITIVE) * 1.15;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{} ({})", workload.name, workload.unit), ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0u32..2u32, 0f64..top)
        .map_err(|e| chart_error(e.to_string()))?;
    let labels = ["mnemo".to_owned(), shorten(&workload.baseline_name)];
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(2)
        .x_label_formatter(&|x| labels.get(*x as usize).cloned().unwrap_or_default())
        .y_desc(workload.unit.clone())
        .draw()
        .map_err(|e| chart_error(e.to_string()))?;
    let bars = [(0u32, workload.mnemo, BLUE), (1u32, workload.baseline, RED)];
    chart
        .draw_series(bars.iter().map(|(x, value, colour)| {
            Rectangle::new([(*x, 0.0), (*x + 1, *value)], colour.mix(0.6).filled())
        }))
        .map_err(|e| chart_error(e.to_string()))?;
    root.present().map_err(|e| chart_error(e.to_string()))?;
    Ok(())
}

fn shorten(name: &str) -> String {
    name.split(',').next().unwrap_or(name).to_owned()
}

/// The report as a table for a terminal or a README.
pub fn table(report: &BenchReport) -> String {
    let mut out = format!(
        "fsync probe: {:.0} us median write+fdatasync of 4 KiB (ceiling {:.0} appends/s)\n\n",
        report.fsync_probe.median_us, report.fsync_probe.ceiling_per_s
    );
    out.push_str(&format!(
        "| {:<28} | {:>14} | {:>14} | {:>8} | {:<6} | {} |\n|{}|{}|{}|{}|{}|{}|\n",
        "workload",
        "mnemo",
        "compared with",
        "ratio",
        "target",
        "unit / compared with / target",
        "-".repeat(30),
        "-".repeat(16),
        "-".repeat(16),
        "-".repeat(10),
        "-".repeat(8),
        "-".repeat(30)
    ));
    for w in &report.workloads {
        // Latencies in milliseconds can be well under one: they keep three decimals.
        let decimals = if w.unit == "ms" { 3 } else { 1 };
        out.push_str(&format!(
            "| {:<28} | {:>14.decimals$} | {:>14.decimals$} | {:>7.2}x | {:<6} | {}; vs {}; {} |\n",
            w.name,
            w.mnemo,
            w.baseline,
            w.ratio,
            if w.met { "met" } else { "MISSED" },
            w.unit,
            w.baseline_name,
            w.target
        ));
    }
    if !report.rebuild_cpu.is_empty() {
        let total: f64 = report.rebuild_cpu.iter().map(|(_, seconds)| seconds).sum();
        let threads: Vec<String> =
            report.rebuild_cpu.iter().map(|(name, seconds)| format!("{name} {seconds:.1}")).collect();
        out.push_str(&format!("\nrebuild processor time: {total:.1} s ({})\n", threads.join(", ")));
    }
    out
}
