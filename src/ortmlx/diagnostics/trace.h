// Chrome/Perfetto trace-event JSON ({"traceEvents":[...]}) for ONNXRUNTIME_EP_MLX_TRACE.
//
// One TraceSink per output path, shared by every session that traces to it (the reference EP's
// trace is cumulative across the sessions of a process; each EP teardown rewrites the file).
// Events are rendered to JSON when recorded, under the sink's mutex. When tracing is off the EP
// holds a null sink and every hook is one pointer test.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ortmlx {

// Arguments of one event, rendered as a JSON object.
class TraceArgs {
 public:
  TraceArgs& add(const std::string& key, const std::string& value);
  TraceArgs& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  TraceArgs& add(const std::string& key, int64_t value);
  TraceArgs& add(const std::string& key, uint64_t value) {
    return add(key, static_cast<int64_t>(value));
  }
  TraceArgs& add(const std::string& key, int value) {
    return add(key, static_cast<int64_t>(value));
  }
  TraceArgs& add(const std::string& key, double value);
  TraceArgs& add(const std::string& key, bool value);
  std::string json() const { return "{" + body_ + "}"; }
  bool empty() const { return body_.empty(); }

 private:
  void key(const std::string& k);
  std::string body_;
};

class TraceSink {
 public:
  // The sink for `path` (created on first use, kept for the process's lifetime).
  static std::shared_ptr<TraceSink> open(const std::string& path);
  // Whether a file can be created at `path` (its folder exists and is writable).
  static bool writable(const std::string& path);

  const std::string& path() const { return path_; }

  // Microseconds since the process-wide trace epoch.
  static double now_us();

  // A complete span ("ph":"X") that started at start_us and ends now.
  void span(const std::string& name, const char* cat, double start_us, const TraceArgs& args = {});
  void span(const std::string& name, const char* cat, double start_us, double end_us,
            const TraceArgs& args);
  // A thread-scoped instant event ("ph":"i").
  void instant(const std::string& name, const char* cat, const TraceArgs& args = {});
  // A counter track sample ("ph":"C"); args are the series.
  void counter(const std::string& name, const TraceArgs& series);
  // Names the calling thread in the viewer (once per thread per sink).
  void name_thread(const std::string& name);

  // Rewrites the file with every event so far (atomically: temp file + rename).
  void write() const;
  size_t event_count() const;

  // Upper bound on stored events; further ones are counted as dropped.
  static constexpr size_t kMaxEvents = 2'000'000;

  explicit TraceSink(std::string path);

 private:
  void push(std::string event);

  std::string path_;
  mutable std::mutex mu_;
  std::vector<std::string> events_;
  std::vector<uint64_t> named_threads_;
  size_t dropped_ = 0;
};

// RAII span: records [construction, destruction) when the sink is non-null.
class TraceSpan {
 public:
  TraceSpan(TraceSink* sink, std::string name, const char* cat)
      : sink_(sink),
        name_(sink ? std::move(name) : std::string()),
        cat_(cat),
        start_(sink ? TraceSink::now_us() : 0) {}
  ~TraceSpan() {
    if (sink_) sink_->span(name_, cat_, start_, args_);
  }
  TraceArgs& args() { return args_; }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

 private:
  TraceSink* sink_;
  std::string name_;
  const char* cat_;
  double start_;
  TraceArgs args_;
};

// Current OS thread id (as Perfetto shows it).
uint64_t trace_thread_id();

}  // namespace ortmlx
