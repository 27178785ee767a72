// crest predict's output (docs/inference.md): an HDF5 file of rows, one per sample, in which every
// column is a dataset whose first dimension is the row. h5py, pandas (through h5py) and HDF5's
// own tools read it without crest.
//
// A writer appends rows into a temporary file beside the target, which replaces the target only
// at commit(): a run that fails part-way (a corrupt sample without --skip-bad, a full disk) leaves
// no file, and an existing one as it was. Under MPI every rank writes its own part file and rank 0
// an index whose datasets are virtual datasets over the parts (write_prediction_index), so one
// h5py.File(index) reads the whole job's rows.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace crest {

enum class ColumnType { f32, f16, u8, i64, text };

struct ColumnSpec {
  std::string name;  // the dataset's name: "prediction", "mask", "source_file"
  ColumnType type = ColumnType::f32;
  std::vector<int64_t> row_shape;  // one row's shape: [] a scalar, [4], [H, W]
  size_t text_bytes = 0;           // text: the fixed width (NUL-padded)
  bool compress = false;           // gzip, one chunk per row (masks, probabilities)
  size_t row_bytes() const;
};

// Scalar facts about the whole file (the summary metrics, the model, the weights): attributes
// of the root group.
struct PredictionAttributes {
  std::vector<std::pair<std::string, double>> numbers;
  std::vector<std::pair<std::string, std::string>> texts;
};

class PredictionFileWriter {
 public:
  // Creates the temporary file with every column empty. Errors (input) name `path`.
  PredictionFileWriter(std::string path, std::vector<ColumnSpec> columns);
  ~PredictionFileWriter();  // without commit(): the temporary file is removed
  PredictionFileWriter(const PredictionFileWriter&) = delete;
  PredictionFileWriter& operator=(const PredictionFileWriter&) = delete;

  // Appends one row: row[k] points to column k's row_bytes() in its type (f16: the IEEE binary16
  // bits; text: text_bytes characters, NUL-padded).
  void append(const std::vector<const void*>& row);
  int64_t rows() const;
  // Closes the file, then renames it over the target (durably).
  void commit(const PredictionAttributes& attributes);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Writes `path` atomically: for each column a virtual dataset that concatenates, in order, the
// same dataset of every part file (`parts[i]` holding `rows[i]` rows; part names relative to
// `path`'s directory, where HDF5 looks for them), plus `attributes`.
void write_prediction_index(const std::string& path, const std::vector<std::string>& parts,
                            const std::vector<int64_t>& rows,
                            const std::vector<ColumnSpec>& columns,
                            const PredictionAttributes& attributes);

}  // namespace crest
