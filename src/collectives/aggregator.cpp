#include "sparsgd/collectives/aggregator.hpp"

#include "collectives/algorithms.hpp"

namespace sparsgd::collectives {

const std::vector<std::string>& aggregator_names() {
  static const std::vector<std::string> names = {"dense", "allgather", "gtopk", "gtopk-rd", "randk-shared"};
  return names;
}

std::unique_ptr<Aggregator> make_aggregator(const std::string& name) {
  if (name == "dense") return make_dense_ring();
  if (name == "allgather") return make_allgather();
  if (name == "gtopk") return make_gtopk_tree();
  if (name == "gtopk-rd") return make_gtopk_rd();
  if (name == "randk-shared") return make_randk_shared();
  throw InvalidArgument("unknown aggregator '" + name +
                        "' (expected dense, allgather, gtopk, gtopk-rd or randk-shared)");
}

void check_local_selection(const SparseVector& local, std::size_t k, std::size_t max_count, const char* who) {
  validate_k(local.dim, k);
  SPARSGD_ENFORCE_EQ(local.indices.size(), local.values.size(), who << ": selection arrays differ in length");
  SPARSGD_ENFORCE_LE(local.size(), max_count, who << ": local selection holds more entries than allowed");
  for (std::size_t i = 0; i < local.size(); ++i) {
    SPARSGD_ENFORCE_LT(static_cast<std::size_t>(local.indices[i]), local.dim, who << ": selected index out of range");
    if (i > 0) SPARSGD_ENFORCE_LT(local.indices[i - 1], local.indices[i], who << ": selection must be ascending");
  }
}

}  // namespace sparsgd::collectives
