// ImageNet-style image folders, as torchvision's ImageFolder reads them: <dir>/<class>/<image>,
// the classes the sorted names of the subdirectories (a sample's label is its class's index), the
// JPEG files (.jpg, .jpeg in any case) of each class sorted by name, class after class.
//
// A sample is the transformed image (crest/data/datasets/image_sample.hpp) and its int32 label.
// The payload read (and cached) is the file's bytes: decoding and transforming happen per use.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "crest/data/datasets/image_sample.hpp"
#include "crest/data/sample_source.hpp"

namespace crest {

struct ImageFolderOptions {
  std::string dir;    // <dir>/<class>/<image>.jpg
  int64_t limit = 0;  // the first `limit` images in order (0: all)
  ImageTransformOptions transform;
};

// Whether a file name is a JPEG image's: .jpg or .jpeg in any case.
bool is_jpeg_file_name(const std::string& name);

// The class names of an image folder: its subdirectories' names, sorted. Errors (input) name the
// directory when it is missing or holds no class directory.
std::vector<std::string> image_folder_classes(const std::string& dir);

// Errors (input) name the directory or the class directory without images.
std::shared_ptr<SampleSource> open_image_folder(const ImageFolderOptions& options);

}  // namespace crest
