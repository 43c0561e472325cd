// sparsgd._C: the torch layer for Python. Transports (a c10d ProcessGroup, the simulated network
// around any transport), and the averager over flat buffers (on the host engine or the device
// path) that the DDP hook uses per bucket and DistributedOptimizer over the whole model. Every call
// that communicates or computes releases the GIL. The Python pieces on top are in sparsgd/torch.py.

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/extension.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sparsgd/collectives/descriptor.hpp"
#include "sparsgd/collectives/exchange_options.hpp"
#include "sparsgd/compress/descriptor.hpp"
#include "sparsgd/collectives/rank_agreement.hpp"
#include "sparsgd/collectives/aggregator.hpp"
#include "sparsgd/collectives/small_collectives.hpp"
#include "sparsgd/collectives/reference.hpp"
#include "sparsgd/core/build_info.hpp"
#include "sparsgd/core/density.hpp"
#include "sparsgd/sim/cost_model.hpp"
#include "sparsgd/compress/compressor.hpp"
#include "sparsgd/core/error.hpp"
#ifdef SPARSGD_HAVE_CUDA
#include "sparsgd/cuda/magnitude_counts.hpp"
#endif
#include "sparsgd/torch/device_gradient_averager.hpp"
#include "sparsgd/torch/device_selection.hpp"
#include "sparsgd/torch/gradient_averager.hpp"
#include "sparsgd/torch/process_group_transport.hpp"
#include "sparsgd/transport/delayed.hpp"
#include "sparsgd/transport/network_model.hpp"

namespace py = pybind11;

namespace sparsgd::python {
namespace {

using transport::Transport;

// A transport held by Python, with the one it wraps (if any) kept alive beside it.
struct Handle {
  std::shared_ptr<Transport> transport;
  std::shared_ptr<Handle> inner;
  transport::SimulatedNetwork* network = nullptr;  // set when `transport` is one
};

// The exchange the keywords ask for, through the library's one spec (collectives/exchange_options.hpp).
// The network is not passed: the package wraps the transport in the network model itself, and auto
// measures that one.
collectives::ExchangeConfig exchange_config(const std::string& compressor, const std::string& aggregator, double density,
                                            double r_factor, std::uint64_t seed, bool shared_seed, bool error_feedback,
                                            const std::string& index_coding, int auto_trials,
                                            std::uint64_t threshold_period = 32) {
  collectives::ExchangeOptions options;
  options.compressor = compressor;
  options.aggregator = aggregator;
  options.density = density;
  options.r_factor = r_factor;
  options.threshold_period = threshold_period;
  options.error_feedback = error_feedback;
  options.index_coding = index_coding;
  options.auto_trials = auto_trials;
  options.shared_seed = shared_seed;
  return collectives::make_exchange_config(options, seed);
}

py::dict stats_dict(const torch_layer::StepStats& s, double network_seconds) {
  py::dict d;
  d["bytes_sent"] = s.bytes_sent;
  d["messages_sent"] = s.messages_sent;
  d["selected"] = s.selected;
  d["compress_s"] = s.compress_cpu_seconds;
  d["aggregate_s"] = s.aggregate_wall_seconds;
  d["aggregate_cpu_s"] = s.aggregate_cpu_seconds;
  d["feedback_s"] = s.feedback_cpu_seconds;
  d["network_s"] = network_seconds;  // on the network model's clock; 0 without a model
  d["skipped"] = s.skipped;
  d["skip_reason"] = s.skip_reason;
  return d;
}

// Runs `step` on the handle's transport with the GIL released, then flushes the sends it left in
// flight (the process may end after it). With a network model, also returns what the step took on
// the model's clock: the compute outside the step is not charged, and with `align_clocks` every
// rank first starts from the latest rank's clock (an allreduce of P doubles on the transport under
// the model, not charged to it), so that the step is timed as on a cluster where all start together.
template <typename Step>
std::pair<torch_layer::StepStats, double> timed(Handle& h, bool align_clocks, Step&& step) {
  py::gil_scoped_release release;
  if (h.network == nullptr) {
    torch_layer::StepStats stats = step();
    h.transport->flush();
    return {stats, 0.0};
  }
  h.network->discard_compute();
  if (align_clocks) {
    Transport& under = *h.inner->transport;
    std::vector<double> clocks(static_cast<std::size_t>(under.size()), 0.0);
    clocks[static_cast<std::size_t>(under.rank())] = h.network->now();
    collectives::allreduce_sum(under, clocks);
    h.network->set_clock(*std::max_element(clocks.begin(), clocks.end()));
  }
  const double start = h.network->now();
  torch_layer::StepStats stats = step();
  const double seconds = h.network->now() - start;
  h.transport->flush();
  return {stats, seconds};
}

std::span<float> float_span(const torch::Tensor& t, const char* what) {
  if (!t.defined() || t.scalar_type() != torch::kFloat32 || !t.is_cpu() || !t.is_contiguous()) {
    throw InvalidArgument(std::string(what) + " must be a contiguous float32 CPU tensor");
  }
  return {t.data_ptr<float>(), static_cast<std::size_t>(t.numel())};
}

std::vector<torch::Tensor> residual_tensors(const torch_layer::GradientAverager& averager) {
  std::vector<torch::Tensor> out;
  for (const auto& r : averager.residuals()) {
    out.push_back(torch::from_blob(const_cast<float*>(r.data()), {static_cast<std::int64_t>(r.size())}).clone());
  }
  return out;
}

void set_residual_tensors(torch_layer::GradientAverager& averager, const std::vector<torch::Tensor>& tensors) {
  std::vector<std::vector<float>> residuals;
  for (const auto& t : tensors) {
    const auto c = t.detach().to(torch::kFloat32).contiguous();
    const auto span = float_span(c, "a residual");
    residuals.emplace_back(span.begin(), span.end());
  }
  averager.set_residuals(residuals);
}

// The averager of one flat buffer (a DDP bucket, or a model's gradients flattened): segments name the
// parameters in errors. On the host engine for a CPU buffer; on the device path
// (torch/device_gradient_averager.hpp) for a buffer on a GPU, or on the CPU where `device` says so.
class FlatAverager {
 public:
  FlatAverager(std::shared_ptr<Handle> handle, const std::vector<std::size_t>& sizes, std::vector<std::string> names,
               const collectives::ExchangeConfig& config, bool skip_nonfinite, double momentum_correction,
               bool per_segment, const std::optional<std::string>& device)
      : handle_(std::move(handle)) {
    if (device) {
      device_ = std::make_unique<torch_layer::DeviceGradientAverager>(
          *handle_->transport, segments_of(sizes), std::move(names), config, per_segment, skip_nonfinite,
          momentum_correction, torch::Device(*device));
    } else {
      host_ = std::make_unique<torch_layer::GradientAverager>(*handle_->transport, segments_of(sizes), std::move(names),
                                                              config, per_segment, skip_nonfinite, momentum_correction);
    }
  }

  py::dict average(const torch::Tensor& input, torch::Tensor output, std::uint64_t iteration, bool align_clocks) {
    if (device_) {
      auto [stats, network] = timed(*handle_, align_clocks, [&] {
        torch_layer::StepStats checked = device_->check_finite(input, iteration);
        return checked.skipped ? checked : device_->average(input, output, iteration);
      });
      return stats_dict(stats, network);
    }
    const auto in = float_span(input, "the input");
    const auto out = float_span(output, "the output");
    auto [stats, network] = timed(*handle_, align_clocks, [&] {
      torch_layer::StepStats checked = host_->check_finite(in, iteration);
      return checked.skipped ? checked : host_->average(in, out, iteration);
    });
    return stats_dict(stats, network);
  }

  std::string device() const { return device_ ? device_->device().str() : std::string("host"); }
  std::size_t size() const { return device_ ? device_->size() : host_->size(); }
  void set_density(double density) {
    if (device_) {
      device_->set_density(density);
    } else {
      host_->set_density(density);
    }
  }
  std::vector<torch::Tensor> residuals() const {
    return device_ ? device_->residuals() : residual_tensors(*host_);
  }
  void set_residuals(const std::vector<torch::Tensor>& residuals) {
    if (device_) {
      device_->set_residuals(residuals);
    } else {
      set_residual_tensors(*host_, residuals);
    }
  }
  torch::Tensor local_velocity() const {
    if (device_) return device_->local_velocity();
    const auto& v = host_->local_velocity();
    return torch::from_blob(const_cast<float*>(v.data()), {static_cast<std::int64_t>(v.size())}).clone();
  }
  void set_local_velocity(const torch::Tensor& t) {
    if (device_) return device_->set_local_velocity(t);
    const auto c = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    const auto span = float_span(c, "a velocity");
    host_->set_local_velocity(std::vector<float>(span.begin(), span.end()));
  }

 private:
  static torch_layer::Segments segments_of(const std::vector<std::size_t>& sizes) {
    torch_layer::Segments s;
    std::size_t at = 0;
    for (const std::size_t n : sizes) {
      s.emplace_back(at, at + n);
      at += n;
    }
    return s;
  }
  std::shared_ptr<Handle> handle_;
  std::unique_ptr<torch_layer::GradientAverager> host_;
  std::unique_ptr<torch_layer::DeviceGradientAverager> device_;
};

// The serial reference of one exchange step (tests): every worker's selection from its accumulated
// gradient, the aggregation by the plain reference, the average, and each worker's residual.
py::tuple reference_average(const std::string& compressor, const std::string& aggregator, double density,
                            const std::vector<torch::Tensor>& accs, std::uint64_t iteration, double r_factor,
                            std::uint64_t seed, bool shared_seed) {
  SPARSGD_ENFORCE(!accs.empty(), "no workers");
  // The step is the same with or without error feedback; what differs is how acc was made.
  const auto config = exchange_config(compressor, aggregator, density, r_factor, seed, shared_seed, false, "raw", 0);
  auto selector = compress::make_compressor(config.compressor);
  std::vector<SparseVector> selections;
  std::vector<torch::Tensor> contiguous;
  const std::size_t n = static_cast<std::size_t>(accs[0].numel());
  const std::size_t k = k_from_density(n, density);
  for (std::size_t w = 0; w < accs.size(); ++w) {
    contiguous.push_back(accs[w].detach().to(torch::kFloat32).contiguous().clone());
    const auto acc = float_span(contiguous.back(), "an accumulated gradient");
    SPARSGD_ENFORCE_EQ(acc.size(), n, "every worker's buffer has the same length");
    SparseVector selection;
    selector->compress(acc, k, {iteration, static_cast<int>(w)}, selection);
    selections.push_back(std::move(selection));
  }
  const auto want = collectives::reference_aggregate(aggregator, selections, k);
  std::vector<float> mean = collectives::reference_average(want, n, static_cast<int>(accs.size()));
  torch::Tensor average = torch::from_blob(mean.data(), {static_cast<std::int64_t>(n)}).clone();
  py::list residuals, consumed;
  for (std::size_t w = 0; w < accs.size(); ++w) {
    float* r = contiguous[w].data_ptr<float>();
    torch::Tensor mask = torch::zeros({static_cast<std::int64_t>(n)}, torch::kBool);
    bool* m = mask.data_ptr<bool>();
    for (std::size_t e = 0; e < selections[w].size(); ++e) {
      if (want.consumed[w][e]) {
        r[selections[w].indices[e]] = 0.0f;
        m[selections[w].indices[e]] = true;
      }
    }
    residuals.append(contiguous[w]);
    consumed.append(mask);
  }
  return py::make_tuple(average, residuals, consumed);
}

}  // namespace
}  // namespace sparsgd::python

PYBIND11_MODULE(_C, m) {
  using namespace sparsgd;
  using namespace sparsgd::python;
  m.doc() = "sparsgd's C++ layers: transports and the flat averager (host engine or device path)";

  // Errors: every sparsgd::Error is a sparsgd.Error (a RuntimeError); bad arguments are also
  // ValueErrors. Registered base first: pybind11 tries the last registered first.
  auto& error = py::register_exception<Error>(m, "Error", PyExc_RuntimeError);
  py::register_exception<InvalidData>(m, "InvalidData", error.ptr());
  auto& transport_error = py::register_exception<transport::TransportError>(m, "TransportError", error.ptr());
  py::register_exception<transport::PeerFailed>(m, "PeerFailed", transport_error.ptr());
  const py::object invalid_argument_bases = py::make_tuple(error, py::handle(PyExc_ValueError));
  py::object invalid_argument = py::reinterpret_steal<py::object>(
      PyErr_NewException("sparsgd._C.InvalidArgument", invalid_argument_bases.ptr(), nullptr));
  m.attr("InvalidArgument") = invalid_argument;
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const InvalidArgument& e) {
      PyErr_SetString(py::module_::import("sparsgd._C").attr("InvalidArgument").ptr(), e.what());
    }
  });

  m.def("reference_average", &reference_average, py::arg("compressor"), py::arg("aggregator"), py::arg("density"),
        py::arg("accs"), py::arg("iteration"), py::arg("r_factor") = 4.0, py::arg("seed") = 0,
        py::arg("shared_seed") = false,
        "The serial reference of one step (for tests): (average, [residual of each worker], [mask of the entries "
        "each worker sent that the sum consumed]) from each worker's accumulated gradient (gradient + residual)");
  m.def("validate_exchange", [](const std::string& compressor, const std::string& aggregator, double density,
                                double r_factor, std::uint64_t seed, bool shared_seed, bool error_feedback,
                                const std::string& index_coding, int auto_trials, std::uint64_t threshold_period) {
    exchange_config(compressor, aggregator, density, r_factor, seed, shared_seed, error_feedback, index_coding,
                    auto_trials, threshold_period);
  }, py::arg("compressor"), py::arg("aggregator"), py::arg("density"), py::arg("r_factor"), py::arg("seed"),
        py::arg("shared_seed"), py::arg("error_feedback"), py::arg("index_coding") = "raw", py::arg("auto_trials") = 2,
        py::arg("threshold_period") = 32,
        "Raises InvalidArgument (a ValueError) for options that cannot make an exchange, as the C++ layer would");
  m.def("aggregation_cost", [](const std::string& aggregator, int workers, std::size_t n, double density,
                               const std::string& network) {
    SPARSGD_ENFORCE(workers >= 1, "workers must be >= 1, got " << workers);
    const bool dense = collectives::find_aggregator(aggregator).properties.dense_result;
    const auto cost = sim::aggregation_cost(aggregator, workers, n, dense ? n : k_from_density(n, density),
                                            transport::parse_network(network));
    py::dict d;
    d["seconds"] = cost.seconds;
    d["messages"] = cost.messages;
    d["bytes_per_worker"] = cost.bytes_per_worker;
    return d;
  }, py::arg("aggregator"), py::arg("workers"), py::arg("n"), py::arg("density"), py::arg("network"),
        "The closed-form alpha-beta cost of one aggregation of n floats (k from the density) on P workers");
  m.def("version", [] { return std::string(version()); }, "The library's version, e.g. '0.1.0'");
  m.def("source_revision", [] { return std::string(source_revision()); },
        "The git commit the library was built from ('-dirty': with changes; 'unknown': not from git)");
  m.def("cuda_kernels_built", [] {
#ifdef SPARSGD_HAVE_CUDA
    return true;
#else
    return false;
#endif
  }, "Whether this build holds sparsgd's own CUDA kernels (configured with SPARSGD_CUDA and nvcc found)");
#ifdef SPARSGD_HAVE_CUDA
  m.def("magnitude_counts", [](const torch::Tensor& values, std::uint32_t pivot) {
    SPARSGD_ENFORCE(values.is_cuda(), "magnitude_counts takes a CUDA tensor, got one on " << values.device().str());
    SPARSGD_ENFORCE(values.scalar_type() == torch::kFloat32,
                    "magnitude_counts takes float32, got " << c10::toString(values.scalar_type()));
    const torch::Tensor flat = values.contiguous().view(-1);
    cuda::MagnitudeCounts counts;
    {
      py::gil_scoped_release released;
      const c10::DeviceGuard on_its_device(flat.device());
      // The default stream, which orders after the work torch queued on its own default stream.
      counts = cuda::magnitude_counts(flat.data_ptr<float>(), static_cast<std::size_t>(flat.numel()), pivot);
    }
    py::dict d;
    d["greater"] = counts.greater;
    d["equal"] = counts.equal;
    d["max_key"] = counts.max_key;
    return d;
  }, py::arg("values"), py::arg("pivot"),
        "Counts of magnitude keys (float bits without the sign) above and equal to `pivot`, and the largest key, "
        "of a float32 CUDA tensor, computed on its device");
#endif
  m.def("compressor_names", [] { return compress::compressor_names(); });
  m.def("index_coding_names", [] { return collectives::index_coding_names(); });
  m.def("max_auto_trials", [] { return collectives::kMaxAutoTrialRounds; });
  m.def("aggregator_names", [] { return collectives::aggregator_names(); });
  m.def("aggregator_properties", [](const std::string& name) {
    const collectives::AggregatorDescriptor& d = collectives::find_aggregator(name);
    py::dict out;
    out["name"] = std::string(d.name);
    out["wire_id"] = d.wire_id;
    out["summary"] = std::string(d.summary);
    for (const collectives::PropertyValue& p : collectives::property_values(d.properties)) {
      out[py::str(std::string(p.name))] = p.flag ? py::object(py::bool_(p.value != 0)) : py::object(py::int_(p.value));
    }
    return out;
  }, py::arg("name"), "What an aggregator's descriptor says of it; raises InvalidArgument for an unknown name");
  m.def("compressor_properties", [](const std::string& name) {
    const compress::CompressorDescriptor& d = compress::find_compressor(name);
    py::dict out;
    out["name"] = std::string(d.name);
    out["summary"] = std::string(d.summary);
    for (const auto& [property, value] : compress::property_values(d.properties)) out[py::str(std::string(property))] = value;
    return out;
  }, py::arg("name"), "What a compressor's descriptor says of it; raises InvalidArgument for an unknown name");

  py::class_<Handle, std::shared_ptr<Handle>>(m, "Transport", "A transport: rank, size, point-to-point messages")
      .def_property_readonly("rank", [](const Handle& h) { return h.transport->rank(); })
      .def_property_readonly("size", [](const Handle& h) { return h.transport->size(); })
      .def("set_timeout", [](Handle& h, std::int64_t ms) {
        SPARSGD_ENFORCE(ms > 0, "timeout_ms must be > 0, got " << ms);
        h.transport->set_timeout(std::chrono::milliseconds(ms));
        if (h.inner) h.inner->transport->set_timeout(std::chrono::milliseconds(ms));
      }, py::arg("timeout_ms"))
      .def("barrier", [](Handle& h) {
        h.transport->barrier();
        h.transport->flush();
      }, py::call_guard<py::gil_scoped_release>())
      .def("counters", [](const Handle& h) {
        const auto& c = h.transport->counters();
        py::dict d;
        d["bytes_sent"] = c.bytes_sent;
        d["bytes_received"] = c.bytes_received;
        d["messages_sent"] = c.messages_sent;
        d["messages_received"] = c.messages_received;
        return d;
      })
      .def("network_clock", [](Handle& h) { return h.network ? h.network->now() : 0.0; },
           "seconds on the network model's clock (0 without a model)")
      .def("any_rank", [](Handle& h, const std::vector<bool>& flags) {
        std::vector<double> values(flags.begin(), flags.end());
        {
          py::gil_scoped_release release;
          if (!values.empty()) collectives::allreduce_max(*h.transport, values);
          h.transport->flush();
        }
        return std::vector<bool>(values.begin(), values.end());
      }, py::arg("flags"),
           "Collective: for each flag, whether it is set on any rank (every rank passes as many)")
      .def("check_ranks_agree", [](Handle& h, const std::vector<std::pair<std::string, std::string>>& fields,
                                   const std::string& what) {
        py::gil_scoped_release release;
        collectives::check_ranks_agree(*h.transport, fields, what);
        h.transport->flush();
      }, py::arg("fields"), py::arg("what"),
           "Collective: raises InvalidArgument on every rank if any rank's (name, value) pairs differ");

  m.def("process_group_transport", [](const c10::intrusive_ptr<c10d::ProcessGroup>& group, std::int64_t timeout_ms,
                                      const c10::intrusive_ptr<c10d::Store>& store, const std::string& prefix) {
    SPARSGD_ENFORCE(timeout_ms > 0, "timeout_ms must be > 0, got " << timeout_ms);
    auto h = std::make_shared<Handle>();
    h->transport = std::make_shared<torch_layer::ProcessGroupTransport>(group, store, prefix);
    h->transport->set_timeout(std::chrono::milliseconds(timeout_ms));
    return h;
  }, py::arg("group"), py::arg("timeout_ms") = 60'000, py::arg("store") = c10::intrusive_ptr<c10d::Store>(),
        py::arg("prefix") = "sparsgd",
        "A transport over a torch.distributed ProcessGroup (gloo, mpi); with the group's store, a rank that "
        "loses a peer names the rank that ended first");

  m.def("simulated_network", [](std::shared_ptr<Handle> inner, const std::string& spec) {
    const auto parsed = transport::parse_network(spec);
    SPARSGD_ENFORCE(parsed.enabled(), "network '" << spec << "' is not a network model (use it without one)");
    auto h = std::make_shared<Handle>();
    auto network = std::make_shared<transport::SimulatedNetwork>(*inner->transport, parsed);
    h->network = network.get();
    h->transport = network;
    h->transport->set_timeout(inner->transport->timeout());
    h->inner = std::move(inner);
    return h;
  }, py::arg("inner"), py::arg("network"),
        "The alpha-beta network model around a transport: 1gbe, 10gbe, paper-1gbe or alpha=S,bw=BITS");

  m.def("selection", [](const torch::Tensor& acc, const std::string& compressor, std::size_t k, std::uint64_t iteration,
                        int rank, std::uint64_t seed, double r_factor, std::uint64_t threshold_period, bool shared_seed,
                        const std::string& engine) {
    compress::CompressorConfig config;
    config.name = compressor;
    config.seed = seed;
    config.r_factor = r_factor;
    config.threshold_period = threshold_period;
    config.shared_seed = shared_seed;
    SPARSGD_ENFORCE(engine == "host" || engine == "device", "engine must be 'host' or 'device', got '" << engine << "'");
    const compress::CompressContext context{iteration, rank};
    py::gil_scoped_release release;
    if (engine == "device") {
      const auto selection = torch_layer::make_device_compressor(config)->select(acc, k, context);
      return std::make_pair(selection.indices, selection.values);
    }
    const torch::Tensor host = acc.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    SparseVector out;
    compress::make_compressor(config)->compress(float_span(host, "acc"), k, context, out);
    std::vector<std::int64_t> indices(out.indices.begin(), out.indices.end());
    return std::make_pair(torch::tensor(indices, torch::kInt64), torch::tensor(out.values, torch::kFloat32));
  }, py::arg("acc"), py::arg("compressor"), py::arg("k"), py::arg("iteration") = 0, py::arg("rank") = 0,
        py::arg("seed") = 0, py::arg("r_factor") = 4.0, py::arg("threshold_period") = 32, py::arg("shared_seed") = false,
        py::arg("engine") = "device",
        "One selection of a compressor (tests, benchmarks): (indices, values); engine 'device' on acc's device "
        "(the device path), 'host' by the host engine (a copy on the CPU)");

  m.def("delayed_transport", [](std::shared_ptr<Handle> inner, double delay_ms) {
    SPARSGD_ENFORCE(std::isfinite(delay_ms) && delay_ms >= 0.0 && delay_ms <= 60'000.0,
                    "delay_ms must be in [0, 60000], got " << delay_ms);
    auto h = std::make_shared<Handle>();
    h->transport = std::make_shared<transport::DelayedTransport>(
        *inner->transport, std::chrono::microseconds(static_cast<std::int64_t>(delay_ms * 1000.0)));
    h->transport->set_timeout(inner->transport->timeout());
    h->inner = std::move(inner);
    return h;
  }, py::arg("inner"), py::arg("delay_ms"),
        "A transport that holds each message back for delay_ms on the wall clock (tests of overlap)");

  py::class_<FlatAverager>(m, "FlatAverager", "Error feedback + compression + aggregation of a flat buffer, averaged")
      .def(py::init([](std::shared_ptr<Handle> h, const std::vector<std::size_t>& sizes, std::vector<std::string> names,
                       const std::string& compressor, const std::string& aggregator, double density, double r_factor,
                       std::uint64_t seed, bool shared_seed, bool skip_nonfinite, double momentum_correction,
                       bool error_feedback, const std::string& index_coding, int auto_trials,
                       std::uint64_t threshold_period, bool per_segment, const std::optional<std::string>& device) {
             return std::make_unique<FlatAverager>(std::move(h), sizes, std::move(names),
                                                   exchange_config(compressor, aggregator, density, r_factor, seed, shared_seed,
                                                                   error_feedback, index_coding, auto_trials,
                                                                   threshold_period),
                                                   skip_nonfinite, momentum_correction, per_segment, device);
           }),
           py::arg("transport"), py::arg("sizes"), py::arg("names"), py::arg("compressor"), py::arg("aggregator"),
           py::arg("density"), py::arg("r_factor") = 4.0, py::arg("seed") = 0, py::arg("shared_seed") = false,
           py::arg("skip_nonfinite") = false, py::arg("momentum_correction") = 0.0, py::arg("error_feedback") = true,
           py::arg("index_coding") = "raw", py::arg("auto_trials") = 2, py::arg("threshold_period") = 32,
           py::arg("per_segment") = false, py::arg("device") = py::none(),
           "momentum_correction > 0: DGC's momentum correction with that momentum (each worker's velocity is "
           "exchanged; apply the average without further momentum). per_segment: one exchange per segment. device "
           "(e.g. 'cuda:0', or 'cpu'): the device path, whose buffers, residuals and velocity live there; None: the "
           "host engine (CPU buffers)")
      .def("average", &FlatAverager::average, py::arg("input"), py::arg("output"), py::arg("iteration"),
           py::arg("align_clocks") = true,
           "Collective: writes the average over the workers of `input` into `output`; returns the step's statistics "
           "(align_clocks: with a network model, start from the latest rank's clock; once a step)")
      .def("set_density", &FlatAverager::set_density)
      .def_property_readonly("size", &FlatAverager::size)
      .def_property_readonly("device", &FlatAverager::device, "'host', or the device of the device path")
      .def("residuals", &FlatAverager::residuals)
      .def("set_residuals", &FlatAverager::set_residuals)
      .def("local_velocity", &FlatAverager::local_velocity,
           "This worker's velocity (momentum correction; empty without)")
      .def("set_local_velocity", &FlatAverager::set_local_velocity);
}
