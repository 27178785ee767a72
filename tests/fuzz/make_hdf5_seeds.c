/* The HDF5 seeds of tests/fuzz/corpus (run by make_corpus.py through h5cc): a 4x6x2 DeepCAM
   sample with float labels, one with int16 labels and chunked, gzip-compressed data, and a
   stats.h5. Usage: make_hdf5_seeds OUT_DIR */
#include <hdf5.h>
#include <stdio.h>

static void dataset(hid_t group, const char* name, hid_t type, int rank, const hsize_t* dims,
                    const void* data, int chunked) {
  hid_t space = rank ? H5Screate_simple(rank, dims, NULL) : H5Screate(H5S_SCALAR);
  hid_t plist = H5Pcreate(H5P_DATASET_CREATE);
  if (chunked) {
    hsize_t chunk[3] = {2, 3, 2};
    H5Pset_chunk(plist, rank, chunk);
    H5Pset_deflate(plist, 6);
  }
  hid_t d = H5Dcreate2(group, name, type, space, H5P_DEFAULT, plist, H5P_DEFAULT);
  H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
  H5Dclose(d);
  H5Pclose(plist);
  H5Sclose(space);
}

static void sample(const char* path, int int_labels) {
  float data[4 * 6 * 2], labels[4 * 6];
  short labels16[4 * 6];
  for (int i = 0; i < 48; ++i) data[i] = (float)(i % 7) * 0.25f - 0.5f;
  for (int i = 0; i < 24; ++i) labels[i] = (float)(labels16[i] = (short)(i % 3));
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t g = H5Gcreate2(f, "climate", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t dims[3] = {4, 6, 2};
  dataset(g, "data", H5T_IEEE_F32LE, 3, dims, data, int_labels);
  if (int_labels)
    dataset(g, "labels_0", H5T_STD_I16LE, 2, dims, labels16, 0);
  else
    dataset(g, "labels_0", H5T_IEEE_F32LE, 2, dims, labels, 0);
  H5Gclose(g);
  H5Fclose(f);
}

static void stats(const char* path) {
  const float values[2] = {-1.5f, 2.0f};
  const long long count = 3;
  const hsize_t dims[1] = {2};
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  hid_t g = H5Gcreate2(f, "climate", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  dataset(g, "count", H5T_STD_I64LE, 0, dims, &count, 0);
  const char* names[4] = {"minval", "maxval", "mean", "sqmean"};
  for (int i = 0; i < 4; ++i) dataset(g, names[i], H5T_IEEE_F32LE, 1, dims, values, 0);
  H5Gclose(g);
  H5Fclose(f);
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  char path[4096];
  snprintf(path, sizeof path, "%s/sample.h5", argv[1]);
  sample(path, 0);
  snprintf(path, sizeof path, "%s/sample_int16_labels_chunked.h5", argv[1]);
  sample(path, 1);
  snprintf(path, sizeof path, "%s/stats.h5", argv[1]);
  stats(path);
  return 0;
}
