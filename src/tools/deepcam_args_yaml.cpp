// The crest run config equivalent to a DeepCAM reference run (deepcam_args.hpp): every crest key
// the reference's arguments decide, each commented with the argument it comes from.
#include <array>
#include <charconv>
#include <sstream>

#include "deepcam_args.hpp"

namespace crest::tools {
namespace {

constexpr size_t kCommentColumn = 36;  // where a value's comment starts, when the line allows
constexpr size_t kWidth = 100;         // comment lines are wrapped to this width

// Shortest text that reads back as the same double, always with a '.' or an exponent's mantissa
// '.', so that every YAML reader takes it as a float.
std::string number(double v) {
  std::array<char, 64> buf{};
  const auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  std::string s(buf.data(), end);
  if (s.find('.') != std::string::npos) return s;
  const size_t e = s.find('e');
  return e == std::string::npos ? s + ".0" : s.insert(e, ".0");
}

std::string number(int64_t v) { return std::to_string(v); }

template <typename T>
std::string list(const std::vector<T>& values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + number(values[i]);
  return s + "]";
}

// A double-quoted YAML scalar: paths and names are taken literally, whatever they hold.
std::string yaml_string(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    q += (c == '\n' || c == '\r') ? ' ' : c;
  }
  return q + "\"";
}

// YAML text with comments: values at section indent 4, notes aligned at kCommentColumn, comment
// paragraphs wrapped at kWidth.
class YamlText {
 public:
  void blank() { out_ << "\n"; }
  void section(const std::string& name) { out_ << "\n" << name << ":\n"; }
  void top(const std::string& key, const std::string& value, const std::string& note = "") {
    line(key + ": " + value, note);
  }
  void value(const std::string& key, const std::string& value, const std::string& note = "") {
    line("    " + key + ": " + value, note);
  }
  // A comment paragraph; `indent` spaces before each "#".
  void comment(const std::string& text, size_t indent = 0) {
    const std::string lead = std::string(indent, ' ') + "# ";
    std::istringstream words(text);
    std::string row, word;
    while (words >> word) {
      if (!row.empty() && lead.size() + row.size() + 1 + word.size() > kWidth) {
        out_ << lead << row << "\n";
        row.clear();
      }
      row += (row.empty() ? "" : " ") + word;
    }
    out_ << lead << row << "\n";
  }
  // A command line as comment lines "#   word word \\", wrapped before kWidth.
  void command(const std::vector<std::string>& words) {
    std::string row = "#  ";
    for (const auto& w : words) {
      if (row.size() > 3 && row.size() + 1 + w.size() + 2 > kWidth) {
        out_ << row << " \\\n";
        row = "#     ";
      }
      row += " " + w;
    }
    out_ << row << "\n";
  }
  std::string str() const { return out_.str(); }

 private:
  void line(const std::string& text, const std::string& note) {
    out_ << text;
    if (!note.empty())
      out_ << std::string(text.size() < kCommentColumn ? kCommentColumn - text.size() : 2, ' ')
           << "# " << note;
    out_ << "\n";
  }
  std::ostringstream out_;
};

// "--name", marked when the value is the reference parser's default.
std::string from(const DeepcamArgs& a, const std::string& name) {
  return "--" + name + (a.given.count(name) ? "" : " (default)");
}

// A token as a POSIX shell reads it back: single-quoted where it holds anything but plain
// characters (milestones="800 1600" arrives as one word with a space).
std::string shell_word(const std::string& token) {
  const bool plain = !token.empty() && token.find_first_not_of(
                                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                           "0123456789-_=.,/:+@%") == std::string::npos;
  if (plain) return token;
  std::string q = "'";
  // A line break would end the YAML comment the command is printed in.
  for (char c : token)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c == '\n' || c == '\r' ? ' ' : c);
  return q + "'";
}

// "--name value", marked when the value is the reference parser's default.
std::string with_value(const DeepcamArgs& a, const std::string& name, const std::string& value) {
  return "--" + name + " " + value + (a.given.count(name) ? "" : " (default)");
}

void write_header(YamlText& y, const std::vector<std::string>& argv) {
  y.comment("crest run config of a DeepCAM reference run (mlcommons/hpc deepcam train.py), from");
  std::vector<std::string> words{"crest", "config", "from-args", "deepcam", "--"};
  for (const auto& arg : argv) words.push_back(shell_word(arg));
  y.command(words);
  y.comment(
      "Each value names the train.py argument it comes from; \"(default)\" marks the reference "
      "parser's default for an argument the command line left out. Train with: crest train "
      "--config FILE (docs/configs.md).");
  y.blank();
}

void write_output_dir(YamlText& y, const DeepcamArgs& a) {
  if (a.output_dir)
    y.top("output_dir", yaml_string(*a.output_dir), from(a, "output_dir"));
  else
    y.comment(
        "--output_dir not given (the reference needs one): crest's default is runs/<this file's "
        "name without .yaml>.");
}

void write_mlperf(YamlText& y) {
  y.section("mlperf");
  y.value("org", yaml_string("Umbrella Corp."),
          "the reference's placeholder (train.py): put yours");
  y.value("division", "closed");
  y.value("status", "onprem");
  y.value("platform", "SUBMISSION_PLATFORM_PLACEHOLDER");
}

void write_data(YamlText& y, const DeepcamArgs& a) {
  y.section("data");
  y.value("name", "deepcam");
  y.value("data_dir", yaml_string(a.data_dir_prefix), from(a, "data_dir_prefix"));
  y.value("format", "hdf5", "the reference reads HDF5 only");
  y.value("sample_shape", "[768, 1152, 16]", "the reference's fields: H, W, channels");
  y.value("channels", list(a.channels), from(a, "channels"));
  y.value("batch_size", number(a.local_batch_size), from(a, "local_batch_size"));
  y.value("n_epochs", number(a.max_epochs), from(a, "max_epochs"));
  y.comment(
      "--seed seeds the reference's weights, as data.seed does; with train_order: reference the "
      "file order uses the reference's fixed seeds (12345 for the one file-list shuffle, 0 + "
      "epoch for its DistributedSampler), not data.seed.",
      4);
  y.value("seed", number(a.seed), from(a, "seed"));
  y.value("shuffle", "true", "the reference reshuffles the training files every epoch");
  y.value("train_order", "reference",
          "the reference's sample sequence per rank and epoch (data/__init__.py)");
}

void write_model(YamlText& y) {
  y.section("model");
  y.value("name", "deepcam", "DeepLabv3+ (architecture/deeplab_xception.py)");
  y.value("n_classes", "3", "background, tropical cyclone, atmospheric river");
}

void write_optimizer(YamlText& y, const DeepcamArgs& a) {
  y.section("optimizer");
  y.value("name", a.optimizer, from(a, "optimizer"));
  y.value("betas", list(a.optimizer_betas), from(a, "optimizer_betas"));
  if (a.adam_eps)
    y.value("eps", number(*a.adam_eps),
            "--adam_eps (example scripts; train.py's parser rejects it)");
  else
    y.value("eps", number(1e-6), "the reference's fixed 1e-6 (utils/optimizer_helpers.py)");
  y.value("weight_decay", number(a.weight_decay), from(a, "weight_decay"));
  if (a.optimizer == "LAMB")
    y.value("max_grad_norm", number(1.0), "apex FusedLAMB's default, which the reference keeps");
}

void write_lr_schedule(YamlText& y, const DeepcamArgs& a) {
  y.section("lr_schedule");
  y.value("start_lr", number(a.start_lr), from(a, "start_lr"));
  const bool warmup_given = a.given.count("lr_warmup_steps") || a.given.count("lr_warmup_factor");
  if (!a.lr_schedule) {
    y.comment("--lr_schedule not given: the rate stays start_lr.", 4);
    if (warmup_given)
      y.comment("--lr_warmup_steps " + number(a.lr_warmup_steps) + ", --lr_warmup_factor " +
                    number(a.lr_warmup_factor) +
                    ": ignored without --lr_schedule, as by the reference.",
                4);
    return;
  }
  const DeepcamLrScheduleArg& s = *a.lr_schedule;
  y.comment("--lr_schedule " + s.text, 4);
  y.value("type", s.type);
  if (s.type == "multistep") {
    y.value("milestones", list(s.milestones), "optimizer steps after the warmup");
    y.value("decay_rate", number(s.decay_rate));
  } else {
    y.value("t_max", number(s.t_max));
    y.value("eta_min", number(s.eta_min));
  }
  y.value("lr_warmup_steps", number(a.lr_warmup_steps), from(a, "lr_warmup_steps"));
  y.value("lr_warmup_factor", number(a.lr_warmup_factor), from(a, "lr_warmup_factor"));
}

void write_train(YamlText& y, const DeepcamArgs& a) {
  y.section("train");
  y.value("metrics", "[iou]");
  y.value("target_iou", number(a.target_iou), from(a, "target_iou"));
  y.value("gradient_accumulation_frequency", number(a.gradient_accumulation_frequency),
          from(a, "gradient_accumulation_frequency"));
  if (a.save_frequency > 0) {
    y.value("checkpoint_every", number(a.save_frequency), from(a, "save_frequency") + ": epochs");
  } else {
    y.comment(with_value(a, "save_frequency", number(a.save_frequency)) +
                  ": the reference never saves; crest checkpoints at the end of the run at "
                  "least (0), which crest train --resume needs.",
              4);
    y.value("checkpoint_every", "0");
  }
  y.comment(with_value(a, "logging_frequency", number(a.logging_frequency)) +
                ": the reference logs learning_rate, train_accuracy and train_loss into its MLPerf "
                "log every that many steps (<= 0: once per epoch); crest logs them once per epoch "
                "(docs/mlperf.md) and prints a progress line every log_every_s seconds.",
            4);
}

void write_dist(YamlText& y, const DeepcamArgs& a) {
  y.section("dist");
  y.value("batchnorm_group_size", number(a.batchnorm_group_size), from(a, "batchnorm_group_size"));
  y.comment(
      "The reference splits no sample; dist.spatial: [h, w] splits each one among h x w "
      "ranks (docs/distributed.md, \"Spatial split\").",
      4);
  y.value("spatial", "[1, 1]");
}

std::string optional_text(const std::optional<std::string>& v) { return v ? *v : "(none)"; }

// The arguments with no crest key: what crest does instead.
void write_unmapped(YamlText& y, const DeepcamArgs& a) {
  y.blank();
  y.comment("train.py arguments with no crest key:");
  y.comment(with_value(a, "wireup_method", a.wireup_method) +
            ": crest finds its launcher (mpirun, srun, jsrun, flux run) and wires the ranks up "
            "over MPI itself (dist.backend: auto); without one it runs a single rank.");
  y.comment(with_value(a, "wandb_certdir", a.wandb_certdir) + ": unused by the reference too.");
  y.comment(with_value(a, "run_tag", optional_text(a.run_tag)) +
            ": the reference names its log <output_dir>/logs/<run_tag>.log; crest writes "
            "mllog.txt, train.log and config.yaml into output_dir (docs/run-directory.md).");
  y.comment(with_value(a, "max_inter_threads", number(a.max_inter_threads)) +
            ": the reference's DataLoader workers; crest's loader reads on its own threads "
            "(data.n_parallel_reads, 0 = automatic) and keeps data.prefetch batches ahead.");
  y.comment(with_value(a, "model_prefix", a.model_prefix) +
            ": the reference's checkpoint names; crest's are "
            "output_dir/checkpoints/ckpt-<step>.safetensors (docs/checkpoints.md).");
  y.comment(std::string("--resume_logging") + (a.resume_logging ? " (given)" : " (not given)") +
            ": unused by the reference; crest train --resume RUN_DIR continues a crest run.");
  if (a.checkpoint)
    y.comment("--checkpoint " + *a.checkpoint +
              ": crest does not read torch checkpoints. To start from its weights, save its "
              "\"model\" state_dict as safetensors (safetensors.torch.save_file(torch.load(F)"
              "[\"model\"], \"w.safetensors\")) and run crest train --init-weights w.safetensors "
              "(docs/weights.md; the module. prefix is dropped). Its optimizer state, step and "
              "epoch are not carried over.");
  else
    y.comment(
        "--checkpoint not given: crest continues its own runs with crest train --resume RUN_DIR.");
}

}  // namespace

std::string deepcam_args_to_yaml(const DeepcamArgs& args, const std::vector<std::string>& argv) {
  YamlText y;
  write_header(y, argv);
  write_output_dir(y, args);
  write_mlperf(y);
  write_data(y, args);
  write_model(y);
  write_optimizer(y, args);
  write_lr_schedule(y, args);
  write_train(y, args);
  write_dist(y, args);
  write_unmapped(y, args);
  return y.str();
}

}  // namespace crest::tools
