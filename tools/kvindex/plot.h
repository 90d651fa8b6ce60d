// A minimal SVG line chart drawn by the project (no library): axes, ticks, a legend, one
// polyline with point markers per series (`kvindex replay --plot`, docs/cli.md).
#ifndef KVINDEX_TOOLS_PLOT_H_
#define KVINDEX_TOOLS_PLOT_H_

#include <string>
#include <utility>
#include <vector>

namespace kvindex::cli {

struct PlotSeries {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in the given order
};

struct PlotSpec {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool log_x = false;  // x on a log10 scale (all x must be > 0)
};

// A standalone SVG document (UTF-8, well-formed XML). y is drawn from 0 to the largest y
// (at least 1e-9), x over its range.
std::string RenderSvgPlot(const PlotSpec& spec, const std::vector<PlotSeries>& series);

}  // namespace kvindex::cli

#endif  // KVINDEX_TOOLS_PLOT_H_
