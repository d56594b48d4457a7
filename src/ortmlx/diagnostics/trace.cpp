#include "ortmlx/diagnostics/trace.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>

#if defined(__linux__)
#include <sys/syscall.h>
#endif

#include "ortmlx/diagnostics/report.h"

namespace ortmlx {

namespace {

std::string number(double v) {
  if (!std::isfinite(v)) return "0";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3f", v);
  return buf;
}

const std::chrono::steady_clock::time_point& epoch() {
  static const auto t0 = std::chrono::steady_clock::now();
  return t0;
}

}  // namespace

uint64_t trace_thread_id() {
#if defined(__linux__)
  return static_cast<uint64_t>(::syscall(SYS_gettid));
#else
  return static_cast<uint64_t>(std::hash<std::thread::id>{}(std::this_thread::get_id()) &
                               0x7fffffff);
#endif
}

void TraceArgs::key(const std::string& k) {
  if (!body_.empty()) body_ += ",";
  body_ += "\"" + json_escape(k) + "\":";
}

TraceArgs& TraceArgs::add(const std::string& k, const std::string& value) {
  key(k);
  body_ += "\"" + json_escape(value) + "\"";
  return *this;
}

TraceArgs& TraceArgs::add(const std::string& k, int64_t value) {
  key(k);
  body_ += std::to_string(value);
  return *this;
}

TraceArgs& TraceArgs::add(const std::string& k, double value) {
  key(k);
  body_ += number(value);
  return *this;
}

TraceArgs& TraceArgs::add(const std::string& k, bool value) {
  key(k);
  body_ += value ? "true" : "false";
  return *this;
}

std::shared_ptr<TraceSink> TraceSink::open(const std::string& path) {
  // Leaked registry: sinks must outlive every session, including those torn down at exit.
  static auto* mu = new std::mutex;
  static auto* sinks = new std::map<std::string, std::shared_ptr<TraceSink>>;
  (void)epoch();
  std::lock_guard<std::mutex> lock(*mu);
  auto& sink = (*sinks)[path];
  if (!sink) sink = std::make_shared<TraceSink>(path);
  return sink;
}

TraceSink::TraceSink(std::string path) : path_(std::move(path)) {}

bool TraceSink::writable(const std::string& path) {
  const auto slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? std::string(".") : path.substr(0, slash == 0 ? 1 : slash);
  return ::access(dir.c_str(), W_OK | X_OK) == 0;
}

double TraceSink::now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - epoch())
      .count();
}

void TraceSink::push(std::string event) {
  std::lock_guard<std::mutex> lock(mu_);
  if (events_.size() >= kMaxEvents) {
    ++dropped_;
    return;
  }
  events_.push_back(std::move(event));
}

static std::string head(const std::string& name, const char* cat, const char* ph, double ts) {
  std::string e = "{\"name\":\"" + json_escape(name) + "\",\"cat\":\"" + json_escape(cat) +
                  "\",\"ph\":\"" + ph + "\",\"ts\":" + number(ts) +
                  ",\"pid\":" + std::to_string(::getpid()) +
                  ",\"tid\":" + std::to_string(trace_thread_id());
  return e;
}

void TraceSink::span(const std::string& name, const char* cat, double start_us,
                     const TraceArgs& args) {
  span(name, cat, start_us, now_us(), args);
}

void TraceSink::span(const std::string& name, const char* cat, double start_us, double end_us,
                     const TraceArgs& args) {
  std::string e = head(name, cat, "X", start_us);
  e += ",\"dur\":" + number(end_us > start_us ? end_us - start_us : 0.0);
  if (!args.empty()) e += ",\"args\":" + args.json();
  e += "}";
  push(std::move(e));
}

void TraceSink::instant(const std::string& name, const char* cat, const TraceArgs& args) {
  std::string e = head(name, cat, "i", now_us());
  e += ",\"s\":\"t\"";
  if (!args.empty()) e += ",\"args\":" + args.json();
  e += "}";
  push(std::move(e));
}

void TraceSink::counter(const std::string& name, const TraceArgs& series) {
  std::string e = head(name, "counter", "C", now_us());
  e += ",\"args\":" + series.json() + "}";
  push(std::move(e));
}

void TraceSink::name_thread(const std::string& name) {
  const uint64_t tid = trace_thread_id();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (uint64_t t : named_threads_)
      if (t == tid) return;
    named_threads_.push_back(tid);
  }
  std::string e = "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + std::to_string(::getpid()) +
                  ",\"tid\":" + std::to_string(tid) + ",\"args\":{\"name\":\"" + json_escape(name) +
                  "\"}}";
  push(std::move(e));
}

size_t TraceSink::event_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

void TraceSink::write() const {
  std::ostringstream os;
  {
    std::lock_guard<std::mutex> lock(mu_);
    os << "{\"traceEvents\":[\n";
    os << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << ::getpid()
       << ",\"args\":{\"name\":\"onnxruntime-mlx-ep\"}}";
    for (const auto& e : events_) os << ",\n" << e;
    os << "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"ortmlx\",\"dropped_"
          "events\":"
       << dropped_ << "}}\n";
  }
  // Unique temp name: several sessions (or processes) may rewrite the same path.
  const std::string tmp =
      path_ + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(trace_thread_id());
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) throw std::runtime_error("cannot write trace to " + path_);
    f << os.str();
    if (!f) throw std::runtime_error("cannot write trace to " + path_);
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot write trace to " + path_);
  }
}

}  // namespace ortmlx
