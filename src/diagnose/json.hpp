// JSON pieces shared by the seed model's report (render_json.cpp) and the network's (net_render.cpp).
#pragma once

#include <nlohmann/json.hpp>

#include "halfmap/diagnose.hpp"

namespace halfmap::diagnose {

using Json = nlohmann::ordered_json;

/// A number, or "nan", "inf", "-inf".
Json jnum(double v);
/// A data column (the keys of diagnose.hpp's "column").
Json jcolumn(const ColumnStats& c);
/// A loss-scaling simulation (the keys of diagnose.hpp's "simulations").
Json jsim(const Simulation& m);
/// {path, mode, isa, storage, keras_like}.
Json jpath(const PathInfo& p);

}  // namespace halfmap::diagnose
