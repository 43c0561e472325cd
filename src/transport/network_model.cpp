#include "sparsgd/transport/network_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>

namespace sparsgd::transport {
namespace {

double parse_number(const std::string& text, const std::string& spec) {
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    if (used != text.size()) throw std::invalid_argument("trailing characters");
    return v;
  } catch (const std::exception&) {
    throw InvalidArgument("network '" + spec + "': '" + text + "' is not a number");
  }
}

constexpr std::size_t kStampBytes = sizeof(double);

// Bounds that keep every simulated clock finite and meaningful (a terabyte at 1 bit/s is 8.8e12 s;
// millions of messages of a kilosecond each stay far from overflow), and wide enough for any link.
constexpr double kMaxAlphaSeconds = 1000.0;
constexpr double kMinBitsPerSecond = 1.0;
constexpr double kMaxBitsPerSecond = 1e18;

}  // namespace

NetworkSpec parse_network(const std::string& spec) {
  if (spec == "none" || spec.empty()) return {"none", 0.0, 0.0};
  if (spec == "1gbe") return {spec, 50e-6, 1e9 / 8.0};
  if (spec == "10gbe") return {spec, 20e-6, 10e9 / 8.0};
  if (spec == "paper-1gbe") return {spec, 0.436e-3, 1.0 / 9e-9};
  const std::string usage = " (expected none, 1gbe, 10gbe, paper-1gbe or alpha=SECONDS,bw=BITS_PER_SECOND)";
  const auto comma = spec.find(',');
  if (spec.rfind("alpha=", 0) == 0 && comma != std::string::npos && spec.compare(comma + 1, 3, "bw=") == 0) {
    const double alpha = parse_number(spec.substr(6, comma - 6), spec);
    const double bits = parse_number(spec.substr(comma + 4), spec);
    if (!(alpha >= 0.0 && alpha <= kMaxAlphaSeconds)) {
      throw InvalidArgument("network '" + spec + "': alpha must be in [0, 1000] seconds");
    }
    if (!(bits >= kMinBitsPerSecond && bits <= kMaxBitsPerSecond)) {
      throw InvalidArgument("network '" + spec + "': bw must be in [1, 1e18] bits per second");
    }
    return {spec, alpha, bits / 8.0};
  }
  throw InvalidArgument("unknown network '" + spec + "'" + usage);
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

SimulatedNetwork::SimulatedNetwork(Transport& inner, NetworkSpec spec) : TransportWrapper(inner), spec_(std::move(spec)) {
  SPARSGD_ENFORCE(spec_.enabled(), "SimulatedNetwork needs a network with a bandwidth");
  set_timeout(inner.timeout());
  mark_compute();
}

void SimulatedNetwork::charge_compute() { clock_ += std::max(0.0, thread_cpu_seconds() - cpu_mark_); }
void SimulatedNetwork::mark_compute() { cpu_mark_ = thread_cpu_seconds(); }

double SimulatedNetwork::now() {
  charge_compute();
  mark_compute();
  return clock_;
}

void SimulatedNetwork::set_clock(double seconds) {
  clock_ = seconds;
  link_free_ = std::min(link_free_, seconds);
  mark_compute();
}

void SimulatedNetwork::barrier() {
  charge_compute();
  inner_.set_timeout(timeout());
  inner_.barrier();
  mark_compute();
}

double SimulatedNetwork::frame_outgoing(std::span<const std::byte> data, std::vector<std::byte>& framed) {
  const double depart = std::max(clock_, link_free_);
  const double transmit = static_cast<double>(data.size()) / spec_.bytes_per_second;
  link_free_ = depart + transmit;
  const double arrival = link_free_ + spec_.alpha_seconds;
  // The stamp goes after the message, so that the receiver strips it by shortening the buffer
  // instead of moving the whole message down.
  framed.resize(data.size() + kStampBytes);
  if (!data.empty()) std::memcpy(framed.data(), data.data(), data.size());
  std::memcpy(framed.data() + data.size(), &arrival, kStampBytes);
  return link_free_;
}

std::size_t SimulatedNetwork::unframe_incoming(int peer, std::vector<std::byte>& buffer, std::size_t framed) {
  if (framed < kStampBytes) {
    throw TransportError("rank " + std::to_string(rank()) + ": message from rank " + std::to_string(peer) +
                         " lacks the network model's time stamp");
  }
  double arrival = 0.0;
  std::memcpy(&arrival, buffer.data() + framed - kStampBytes, kStampBytes);
  buffer.resize(framed - kStampBytes);
  if (!std::isfinite(arrival)) throw TransportError("corrupt time stamp from rank " + std::to_string(peer));
  clock_ = std::max(clock_, arrival);
  return framed - kStampBytes;
}

void SimulatedNetwork::do_send(int peer, int tag, std::span<const std::byte> data) {
  charge_compute();
  frame_outgoing(data);
  clock_ = link_free_;  // a blocking send returns once the message has left
  inner_.set_timeout(timeout());
  inner_.send(peer, tag, framed_);
  mark_compute();
}

std::size_t SimulatedNetwork::do_recv(int peer, int tag, std::vector<std::byte>& buffer, std::size_t max_bytes) {
  charge_compute();
  inner_.set_timeout(timeout());
  const std::size_t framed = inner_.recv(peer, tag, buffer, max_bytes + kStampBytes);
  const std::size_t bytes = unframe_incoming(peer, buffer, framed);
  mark_compute();
  return bytes;
}

std::size_t SimulatedNetwork::do_sendrecv(int send_peer, int send_tag, std::span<const std::byte> data, int recv_peer,
                                          int recv_tag, std::vector<std::byte>& buffer, std::size_t max_bytes,
                                          const InFlightWork& while_in_flight) {
  charge_compute();
  frame_outgoing(data);
  inner_.set_timeout(timeout());
  InFlightWork timed_work;
  if (while_in_flight) {
    // Only the work itself is charged, not what the transport underneath spent posting the messages.
    timed_work = [&] {
      mark_compute();
      while_in_flight();
      charge_compute();
    };
  }
  const std::size_t framed = inner_.sendrecv(send_peer, send_tag, framed_, recv_peer, recv_tag, buffer,
                                             max_bytes + kStampBytes, timed_work);
  const std::size_t bytes = unframe_incoming(recv_peer, buffer, framed);
  clock_ = std::max(clock_, link_free_);
  mark_compute();
  return bytes;
}

class SimulatedNetwork::PostedSend final : public PendingOperation {
 public:
  PostedSend(SimulatedNetwork& net, int peer, int tag, std::span<const std::byte> data) : net_(net), bytes_(data.size()) {
    net.charge_compute();
    if (!net.spare_frames_.empty()) {
      framed_ = std::move(net.spare_frames_.back());
      net.spare_frames_.pop_back();
    }
    left_at_ = net.frame_outgoing(data, framed_);
    net.inner_.set_timeout(net.timeout());
    inner_ = net.inner_.post_send(peer, tag, framed_);
    net.mark_compute();
  }
  std::size_t wait() override {
    net_.charge_compute();
    if (inner_.pending()) inner_.wait();
    // The inner send is done with the frame, so the next posted send may stamp into it.
    net_.spare_frames_.push_back(std::move(framed_));
    net_.clock_ = std::max(net_.clock_, left_at_);
    net_.mark_compute();
    return bytes_;
  }
  // Done when the inner send is; wait() then moves the clock to when the last byte left.
  bool test() override { return inner_.test(); }
  void abandon() noexcept override { inner_ = Request(); }

 private:
  SimulatedNetwork& net_;
  std::vector<std::byte> framed_;  // what travels: the inner send reads it until it is done
  std::size_t bytes_;
  double left_at_ = 0.0;
  Request inner_;
};

class SimulatedNetwork::PostedReceive final : public PendingOperation {
 public:
  PostedReceive(SimulatedNetwork& net, int peer, int tag, std::vector<std::byte>& buffer, std::size_t max_bytes)
      : net_(net), peer_(peer), buffer_(buffer) {
    net.inner_.set_timeout(net.timeout());
    inner_ = net.inner_.post_recv(peer, tag, buffer, max_bytes + kStampBytes);
  }
  std::size_t wait() override {
    net_.charge_compute();
    const std::size_t framed = inner_.pending() ? inner_.wait() : inner_.bytes();
    const std::size_t bytes = net_.unframe_incoming(peer_, buffer_, framed);
    net_.mark_compute();
    return bytes;
  }
  // Whether the message is here is the inner transport's to say; whether it has arrived on the
  // clock is not known before it is read, so a test that says true lets wait() advance the clock.
  bool test() override { return inner_.test(); }
  void abandon() noexcept override { inner_ = Request(); }

 private:
  SimulatedNetwork& net_;
  int peer_;
  std::vector<std::byte>& buffer_;
  Request inner_;
};

std::unique_ptr<PendingOperation> SimulatedNetwork::do_post_send(int peer, int tag, std::span<const std::byte> data) {
  return std::make_unique<PostedSend>(*this, peer, tag, data);
}

std::unique_ptr<PendingOperation> SimulatedNetwork::do_post_recv(int peer, int tag, std::vector<std::byte>& buffer,
                                                                 std::size_t max_bytes) {
  return std::make_unique<PostedReceive>(*this, peer, tag, buffer, max_bytes);
}

}  // namespace sparsgd::transport
