// Moving batches between the data loader and a compiled model: a loaded batch into the graph's
// sample and target inputs (float32 samples, float32 targets or int32 labels), and the prediction
// back to host memory for the metrics. The one place the trainer touches model memory, so a
// device backend changes only this file's copies. Under a spatial split (CompileOptions::spatial)
// the samples' input holds this rank's block of each sample: a loader that reads blocks
// (sample_block) gives it as it is, a batch of whole samples has it copied out.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crest/core/memory_resource.hpp"
#include "crest/data/loader.hpp"
#include "crest/data/sample_source.hpp"
#include "crest/graph/executor.hpp"
#include "crest/models/built_model.hpp"

namespace crest {

// What a loader should decode the model's samples into: the 16-bit type of a 16-bit data input
// (CompileOptions::half_inputs; then BatchFeed binds the batch in place), else float32 (BatchFeed
// converts where the model differs, a float64 program's input say).
DType loader_sample_dtype(const Executor& ex, const BuiltModel& model);

// Samples [first, first + count) of a batch-first host view, as a view of their own.
TensorView samples_of(const TensorView& batch, int64_t first, int64_t count);

class BatchFeed {
 public:
  BatchFeed(Executor& ex, const BuiltModel& model);
  // A part of the model (a pipeline stage's program): it holds only `inputs` of the model's
  // sample and target inputs, and its prediction is `prediction` (-1: none).
  BatchFeed(Executor& ex, const BuiltModel& model, std::vector<std::string> inputs,
            ValueId prediction);

  // Makes `batch` the model's input for the next steps: bound in place where the graph allows
  // it and the dtypes agree, else copied (and converted to the input's dtype). On return the
  // batch may be released, unless it was staged (then done_with first).
  void feed(const LoadedBatch& batch);
  // On a device, starts copying `batch` (a later feed's) into a second set of the model's inputs
  // while the steps issued so far compute: each input the model may read from another buffer
  // (the others are copied when it is fed). An input that needs converting (a float64 program's,
  // a split input's blocks) is converted into its staging buffer first, on the host. Its feed then
  // only points the model at that set and orders the device's next work after the copies; the
  // host waits for nothing. A no-op in host memory (the batch is bound in place when fed). One
  // batch at a time: another batch's feed drops it.
  void stage(const LoadedBatch& batch);
  // Before the loader takes back a staged batch (fed or not): waits for the copies reading it.
  void done_with(const LoadedBatch& batch);
  // The same for the samples alone (an inference program, which reads no targets): `samples`
  // holds the sample input's whole batch in the data's layout (float32 or float64 here).
  void feed_samples(const TensorView& samples);
  // Fills every place of the model's inputs with the batch's sample at `place`: a compiled batch
  // size evaluates one sample (an incomplete validation batch, sample by sample), whose loss and
  // prediction are then those of that sample alone (evaluation mixes no samples).
  void feed_copies_of(const LoadedBatch& batch, int64_t place);
  // Samples [first, first + count) of `batch` (a micro-batch of it): the compiled batch is
  // `count`.
  void feed_part(const LoadedBatch& batch, int64_t first, int64_t count);
  // Under a spatial split, the block of each sample's x (channels-last, as the files) the model
  // holds: a loader may read only it (block_of_samples). None where the samples are whole.
  std::optional<SampleBlock> sample_block() const;
  // The prediction of the last forward pass, in host memory: the model's own where that is host
  // memory, else a copy (valid until the next call).
  TensorView host_prediction();

 private:
  void feed_one(const std::string& input, const TensorView& from);
  // The batch's tensor for `input`: the samples or the targets.
  const TensorView& tensor_of(const LoadedBatch& batch, const std::string& input) const;
  void feed_copies(const std::string& input, const TensorView& from, int64_t place);
  // Whether batch `from` of `input` is already this rank's blocks (a block-reading loader's) rather
  // than whole samples; checks that it is one or the other, naming the input.
  bool holds_blocks(const std::string& input, const TensorView& from, const TensorView& to) const;
  // The split that holds `input` as blocks, or null where the input is whole.
  const SpatialSplit* split_of(const std::string& input) const;
  // The input's whole logical shape for `batch` samples, and its layout.
  Shape whole_shape(const std::string& input, int64_t batch) const;
  Layout layout_of(const std::string& input) const;
  // `samples` whole samples at `from` (of `dtype`) as this rank's blocks, in block_.
  const void* block_of(const SpatialSplit& split, const std::string& input, const void* from,
                       int64_t samples, DType dtype);

  Executor& ex_;
  const BuiltModel& model_;
  std::vector<std::string> inputs_;  // the model's sample and target inputs this program holds
  ValueId prediction_ = -1;
  std::vector<std::byte> prediction_copy_;
  std::vector<unsigned char> block_;  // a split input's blocks before their conversion
  // Where a batch for `to` is written on the host before the model gets it: `to` itself in host
  // memory, else the input's staging buffer, allocated once from the memory's staging resource
  // (page-locked on a GPU) and reused for every batch.
  void* host_side(const std::string& input, const TensorView& to);
  // The host side's values into `to` (a copy to the device; nothing in host memory).
  void to_model(const TensorView& to, const void* host_side);
  std::map<std::string, Buffer> staging_;

  // A device model's input read from one of two buffers, its planned storage (0) and one of its
  // own (1): a copy into the one the model is not reading (staged) overlaps the steps that read
  // the other; a batch fed without staging is copied into the one it reads, after their work.
  struct DeviceCopy {
    std::unique_ptr<PendingCopy> copy;
    const void* source = nullptr;  // the host bytes it reads: the batch's, or the staging buffer
    const void* batch = nullptr;   // the loader's tensor it stands for
    int buffer = 0;
  };
  struct DeviceInput {
    void* planned = nullptr;     // buffer 0
    Buffer own;                  // buffer 1, made at the first stage
    int bound = 0;               // the buffer the model reads
    DeviceCopy reading, staged;  // into the bound buffer; into the other one
    // Copies waited for and kept to start the next ones in (MemoryResource's reuse): no copy
    // object is made per step once both buffers have had theirs.
    std::vector<std::unique_ptr<PendingCopy>> spare;
  };
  // Whether `from` reaches `input` by a copy of its bytes into a buffer the model is pointed at.
  bool copies_whole(const std::string& input, const TensorView& from, const TensorView& to) const;
  DeviceInput& device_input(const std::string& input);
  DeviceCopy start_copy(DeviceInput& d, int buffer, const void* host, size_t bytes,
                        const void* batch);
  // Whether `from` reaches `input` only through a conversion on the host (dtype or blocks).
  bool converts(const std::string& input, const TensorView& from, const TensorView& to) const;
  // `from` as `input` takes it (this rank's blocks of a split input, in its dtype), written into
  // host_side(input, to).
  void* converted_on_host(const std::string& input, const TensorView& from, const TensorView& to);
  // Whether `from` is the batch staged for `input`.
  bool staged_for(const std::string& input, const TensorView& from) const;
  static void retire(DeviceInput& d, DeviceCopy& c);
  void feed_device(const std::string& input, const TensorView& from);
  // Drops `input`'s staged copy (waiting for it): something else is fed or written there.
  void drop_staged(const std::string& input);
  std::map<std::string, DeviceInput> device_inputs_;
};

}  // namespace crest
