// crest.train's native half: run_training (the CLI's trainer: checkpoints, logs, MLPerf,
// TensorBoard, MPI) with the GIL released, and Python callbacks called at the end of every epoch
// on rank 0 with the epoch's figures and an object through which they may ask for a stop or a
// checkpoint (RunControl's rules: honoured at the end of that epoch, on every rank).
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "crest/core/error.hpp"
#include "crest/dist/communicator.hpp"
#include "crest/train/stop_signals.hpp"
#include "crest/train/trainer.hpp"
#include "python_samples.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace crest::python {
namespace {

// What one epoch's callbacks asked for; read back after they return, so a callback that keeps
// the object holds nothing of the run.
struct RunRequests {
  bool stop = false, checkpoint = false;
  std::string reason;
};

nb::dict metrics_of(const std::vector<MetricValue>& values) {
  nb::dict d;
  for (const MetricValue& v : values) d[nb::str(v.name.c_str())] = v.value;
  return d;
}

nb::dict epoch_dict(const EpochStats& s) {
  nb::dict d;
  d["epoch"] = s.epoch;
  d["lr"] = s.lr;
  d["train_loss"] = s.train_loss;
  d["val_loss"] = s.validated ? nb::object(nb::float_(s.val_loss)) : nb::none();
  d["val_metrics"] = metrics_of(s.val_metrics);
  d["seconds"] = s.seconds;
  d["train_seconds"] = s.train_seconds;
  d["samples_per_s"] = s.samples_per_s;
  d["data_wait_s"] = s.data_wait_s;
  d["allreduce_s"] = s.allreduce_s;
  d["skipped"] = s.skipped;
  d["overflow_steps"] = s.overflow_steps;
  d["loss_scale"] = s.loss_scale;
  d["last_batch_loss"] = s.last_batch_loss;
  d["last_batch_metrics"] = metrics_of(s.last_batch_metrics);
  return d;
}

nb::dict summary_dict(const TrainSummary& s) {
  nb::list epochs;
  for (const EpochStats& e : s.epochs) epochs.append(epoch_dict(e));
  nb::dict d;
  d["epochs"] = epochs;
  d["status"] = s.status;
  d["exit_code"] = s.exit_code;
  d["stop_reason"] = s.stop_reason;
  d["steps"] = s.steps;
  d["skipped_updates"] = s.skipped_updates;
  d["overflow_steps"] = s.overflow_steps;
  d["last_checkpoint"] = s.last_checkpoint;
  d["parameter_count"] = s.parameter_count;
  return d;
}

// Calls the Python callbacks from the training thread (which holds no GIL). A callback that
// raises stops the run at the end of the epoch; the exception is raised again from crest.train.
class PythonCallbacks : public RunObserver {
 public:
  explicit PythonCallbacks(std::vector<nb::object> callbacks) : callbacks_(std::move(callbacks)) {}

  void run_start(const RunFacts& facts) override { control_ = facts.control; }

  void epoch_stop(const EpochStats& stats) override {
    if (error_ || callbacks_.empty()) return;
    nb::gil_scoped_acquire gil;
    try {
      nb::object requests = nb::cast(RunRequests{});
      const nb::dict epoch = epoch_dict(stats);
      for (const nb::object& callback : callbacks_) callback(epoch, requests);
      apply(nb::cast<const RunRequests&>(requests));
    } catch (nb::python_error& e) {
      error_.emplace(std::move(e));
      control_->request_stop("a Python callback raised " + std::string(error_->what()));
    }
  }

  // Raises the exception a callback raised, if one did (with the GIL held).
  void raise_callback_error() {
    if (!error_) return;
    error_->restore();  // back into Python's error indicator, where python_error() takes it
    error_.reset();
    throw nb::python_error();
  }

 private:
  void apply(const RunRequests& r) {
    if (r.checkpoint) control_->request_checkpoint();
    if (r.stop) control_->request_stop(r.reason.empty() ? "a Python callback asked" : r.reason);
  }

  std::vector<nb::object> callbacks_;
  RunControl* control_ = nullptr;
  std::optional<nb::python_error> error_;
};

nb::dict train(const Config& config, std::vector<nb::object> callbacks,
               const std::string& init_weights, const std::string& save_weights, bool resume,
               bool overwrite, bool quiet, bool progress_bar, const nb::object& train_data,
               const nb::object& valid_data, int64_t mpi_handle) {
  PythonCallbacks observer(std::move(callbacks));
  TrainOptions options;
  if (!train_data.is_none()) {
    options.train_samples = python_samples(config, train_data, config.data.n_train, "train");
    if (!valid_data.is_none())
      options.valid_samples = python_samples(config, valid_data, config.data.n_valid, "validation");
  } else if (!valid_data.is_none()) {
    throw_usage("valid_data needs train_data: both splits come from Python or neither does");
  }
  options.init_weights = init_weights;
  options.save_weights = save_weights;
  options.resume = resume;
  options.overwrite = overwrite;
  options.progress_bar = progress_bar;
  options.extra_observers.push_back(&observer);
  std::ostringstream silent;
  TrainSummary summary;
  std::unique_ptr<Communicator> comm;  // the caller's ranks (mpi4py), else the process world
  {
    nb::gil_scoped_release released;
    const StopSignalsBlocked blocked;  // the threads the run starts never take a stop signal
    if (mpi_handle >= 0) {
      comm = communicator_from_mpi_handle(mpi_handle, config.dist.timeout_s);
      options.communicator = comm.get();
    }
    summary = run_training(config, options, quiet ? silent : std::cout);
    std::cout.flush();
  }
  observer.raise_callback_error();
  return summary_dict(summary);
}

}  // namespace

void bind_train(nb::module_& m) {
  nb::class_<RunRequests>(m, "RunRequests",
                          "What an epoch callback may ask of the run: honoured at the end of the "
                          "epoch, on every rank.")
      .def(
          "stop",
          [](RunRequests& r, const std::string& reason) { r.stop = true, r.reason = reason; },
          "reason"_a = "", "End the run after this epoch, its checkpoint written.")
      .def(
          "checkpoint", [](RunRequests& r) { r.checkpoint = true; },
          "Write a checkpoint at the end of this epoch.")
      .def_ro("stop_requested", &RunRequests::stop)
      .def_ro("checkpoint_requested", &RunRequests::checkpoint);
  m.def("train", &train, "config"_a, "callbacks"_a, "init_weights"_a, "save_weights"_a, "resume"_a,
        "overwrite"_a, "quiet"_a, "progress_bar"_a, "train_data"_a.none(), "valid_data"_a.none(),
        "mpi_handle"_a,
        "Runs crest train in this process; returns the summary as a dict (crest.train wraps it).");
}

}  // namespace crest::python
