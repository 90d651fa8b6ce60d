#include "plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace kvindex::cli {
namespace {

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string TickText(double v) {
  char buf[32];
  if (std::fabs(v) >= 1e6 || (std::fabs(v) < 1e-3 && v != 0)) {
    std::snprintf(buf, sizeof buf, "%.3g", v);
  } else {
    std::snprintf(buf, sizeof buf, "%g", v);
  }
  return buf;
}

// About `count` round ticks (1, 2, 5 × 10^k steps) covering [lo, hi].
std::vector<double> LinearTicks(double lo, double hi, int count) {
  std::vector<double> ticks;
  const double span = hi - lo;
  if (!(span > 0)) return {lo};
  const double raw = span / count;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (mag * m >= raw) {
      step = mag * m;
      break;
    }
  }
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  }
  return ticks;
}

const char* const kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                               "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

}  // namespace

std::string RenderSvgPlot(const PlotSpec& spec, const std::vector<PlotSeries>& series) {
  const double width = 900, height = 500;
  const double left = 80, right = 340, top = 50, bottom = 70;
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  double x_lo = 0, x_hi = 1, y_hi = 1e-9;
  bool any = false;
  for (const PlotSeries& s : series) {
    for (const auto& [x, y] : s.points) {
      const double xv = spec.log_x ? std::log10(x) : x;
      if (!any) x_lo = x_hi = xv;
      x_lo = std::min(x_lo, xv);
      x_hi = std::max(x_hi, xv);
      y_hi = std::max(y_hi, y);
      any = true;
    }
  }
  if (!(x_hi > x_lo)) {
    x_lo -= 0.5;
    x_hi += 0.5;
  }
  std::vector<double> y_ticks = LinearTicks(0, y_hi, 5);
  if (y_ticks.size() >= 2 && y_ticks.back() < y_hi) {
    y_ticks.push_back(y_ticks.back() + (y_ticks[1] - y_ticks[0]));  // a round top
  }
  y_hi = std::max(y_hi, y_ticks.back());
  auto px = [&](double x) {
    const double xv = spec.log_x ? std::log10(x) : x;
    return left + (xv - x_lo) / (x_hi - x_lo) * plot_w;
  };
  auto py = [&](double y) { return top + plot_h - y / y_hi * plot_h; };

  std::string svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + Num(width) + "\" height=\"" +
         Num(height) + "\" viewBox=\"0 0 " + Num(width) + " " + Num(height) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + Num(left + plot_w / 2) + "\" y=\"28\" text-anchor=\"middle\" "
         "font-size=\"15\">" + Escape(spec.title) + "</text>\n";
  // Grid and y ticks.
  for (double t : y_ticks) {
    svg += "<line x1=\"" + Num(left) + "\" y1=\"" + Num(py(t)) + "\" x2=\"" + Num(left + plot_w) +
           "\" y2=\"" + Num(py(t)) + "\" stroke=\"#ddd\"/>\n";
    svg += "<text x=\"" + Num(left - 6) + "\" y=\"" + Num(py(t) + 4) +
           "\" text-anchor=\"end\">" + TickText(t) + "</text>\n";
  }
  // x ticks: powers of ten (and 2, 5 × them when few) on a log axis, round values otherwise.
  std::vector<double> x_ticks;
  if (spec.log_x) {
    for (double e = std::floor(x_lo); e <= std::ceil(x_hi); e += 1) {
      for (double m : {1.0, 2.0, 5.0}) {
        const double v = m * std::pow(10.0, e);
        const double lv = std::log10(v);
        if (lv >= x_lo - 1e-9 && lv <= x_hi + 1e-9 && (m == 1.0 || x_hi - x_lo < 3)) {
          x_ticks.push_back(v);
        }
      }
    }
  } else {
    x_ticks = LinearTicks(x_lo, x_hi, 6);
  }
  for (double t : x_ticks) {
    svg += "<line x1=\"" + Num(px(t)) + "\" y1=\"" + Num(top + plot_h) + "\" x2=\"" +
           Num(px(t)) + "\" y2=\"" + Num(top + plot_h + 5) + "\" stroke=\"black\"/>\n";
    svg += "<text x=\"" + Num(px(t)) + "\" y=\"" + Num(top + plot_h + 20) +
           "\" text-anchor=\"middle\">" + TickText(t) + "</text>\n";
  }
  // Axes and labels.
  svg += "<line x1=\"" + Num(left) + "\" y1=\"" + Num(top) + "\" x2=\"" + Num(left) + "\" y2=\"" +
         Num(top + plot_h) + "\" stroke=\"black\"/>\n";
  svg += "<line x1=\"" + Num(left) + "\" y1=\"" + Num(top + plot_h) + "\" x2=\"" +
         Num(left + plot_w) + "\" y2=\"" + Num(top + plot_h) + "\" stroke=\"black\"/>\n";
  svg += "<text x=\"" + Num(left + plot_w / 2) + "\" y=\"" + Num(height - 20) +
         "\" text-anchor=\"middle\">" + Escape(spec.x_label) + "</text>\n";
  svg += "<text x=\"20\" y=\"" + Num(top + plot_h / 2) +
         "\" text-anchor=\"middle\" transform=\"rotate(-90 20 " + Num(top + plot_h / 2) + ")\">" +
         Escape(spec.y_label) + "</text>\n";
  // Series and legend.
  for (size_t i = 0; i < series.size(); ++i) {
    const PlotSeries& s = series[i];
    const std::string color = kColors[i % (sizeof kColors / sizeof kColors[0])];
    svg += "<g class=\"series\" stroke=\"" + color + "\" fill=\"" + color + "\">\n";
    svg += "<title>" + Escape(s.label) + "</title>\n";
    std::string points;
    for (const auto& [x, y] : s.points) points += Num(px(x)) + "," + Num(py(y)) + " ";
    if (!points.empty()) points.pop_back();
    svg += "<polyline fill=\"none\" stroke-width=\"2\" points=\"" + points + "\"/>\n";
    if (s.points.size() <= 60) {
      for (const auto& [x, y] : s.points) {
        svg += "<circle cx=\"" + Num(px(x)) + "\" cy=\"" + Num(py(y)) + "\" r=\"3\"/>\n";
      }
    }
    svg += "</g>\n";
    const double ly = top + 10 + static_cast<double>(i) * 18;
    svg += "<line x1=\"" + Num(left + plot_w + 15) + "\" y1=\"" + Num(ly) + "\" x2=\"" +
           Num(left + plot_w + 40) + "\" y2=\"" + Num(ly) + "\" stroke=\"" + color +
           "\" stroke-width=\"2\"/>\n";
    svg += "<text x=\"" + Num(left + plot_w + 45) + "\" y=\"" + Num(ly + 4) + "\">" +
           Escape(s.label) + "</text>\n";
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace kvindex::cli
