// The simulated `npu` device: PyTorch's PrivateUse1 backend on host memory.
//
// What it provides (DESIGN.md rule 5):
//   * an allocator with per-device memory statistics (two devices, npu:0 and npu:1);
//   * a device guard (current device and stream per thread, distinct streams, host-timed events);
//   * PrivateUse1 hooks (pinned host memory, generators, storage resize);
//   * native kernels for allocation, views, resize, set_, copies and scalar reads;
//   * a boxed fallback that runs every other ATen op with the CPU kernel.
//
// The fallback works on *aliases*: a CPU tensor that shares the npu tensor's memory. So in-place and
// out= ops write straight into device memory, view ops return real views of the device storage,
// and fresh CPU outputs are adopted by the device without a copy. A written argument whose CPU
// kernel reallocated it (out= of the wrong size) is copied back into a resized device storage.
// Mixed devices are refused as a real accelerator refuses them, so code that passes here does not
// fail on a real NPU for leaving a tensor on the CPU.

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace npu_sim {

constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;
constexpr int kMaxDevices = 8;

int device_count_value() {
  static int n = [] {
    const char* env = std::getenv("FBGEMM_NPU_SIM_DEVICES");
    int v = env ? std::atoi(env) : 2;
    return (v < 1 || v > kMaxDevices) ? 2 : v;
  }();
  return n;
}

// ---------------------------------------------------------------- memory statistics
struct DeviceStats {
  std::atomic<int64_t> allocated{0};
  std::atomic<int64_t> peak{0};
  std::atomic<int64_t> num_allocs{0};
};
DeviceStats g_stats[kMaxDevices];

void stats_add(int dev, int64_t n) {
  auto now = g_stats[dev].allocated.fetch_add(n) + n;
  g_stats[dev].num_allocs.fetch_add(1);
  auto peak = g_stats[dev].peak.load();
  while (now > peak && !g_stats[dev].peak.compare_exchange_weak(peak, now)) {
  }
}

void stats_sub(int dev, int64_t n) {
  g_stats[dev].allocated.fetch_sub(n);
}

thread_local c10::DeviceIndex t_current_device = 0;

// A block of device memory: either ours (malloc'd) or a CPU storage adopted without a copy.
struct Block {
  int64_t nbytes;
  int device;
  void* own;                             // malloc'd memory we free, or nullptr
  c10::intrusive_ptr<c10::StorageImpl> adopted;  // CPU storage kept alive, or null
};

void delete_block(void* ctx) {
  auto* b = static_cast<Block*>(ctx);
  stats_sub(b->device, b->nbytes);
  if (b->own) {
    std::free(b->own);
  }
  delete b;
}

struct NpuAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    const int dev = t_current_device;
    void* p = nullptr;
    if (n > 0) {
      // 64-byte alignment, as vectorised CPU kernels and real device allocators expect.
      const size_t rounded = (n + 63) & ~size_t(63);
      p = std::aligned_alloc(64, rounded);
      TORCH_CHECK(p, "npu (simulated): out of host memory allocating ", n, " bytes");
    }
    auto* b = new Block{static_cast<int64_t>(n), dev, p, {}};
    stats_add(dev, b->nbytes);
    return {p, b, &delete_block, c10::Device(kNpu, static_cast<c10::DeviceIndex>(dev))};
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};
NpuAllocator g_allocator;
REGISTER_ALLOCATOR(kNpu, &g_allocator);

// Adopt a CPU storage's memory as device memory (no copy), keeping the CPU storage alive.
c10::Storage adopt(const c10::Storage& cpu, c10::DeviceIndex dev) {
  auto* b = new Block{static_cast<int64_t>(cpu.nbytes()), dev, nullptr,
                      c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(cpu.unsafeGetStorageImpl())};
  stats_add(dev, b->nbytes);
  c10::DataPtr ptr(cpu.mutable_data(), b, &delete_block, c10::Device(kNpu, dev));
  return c10::Storage(c10::Storage::use_byte_size_t(), cpu.nbytes(), std::move(ptr), &g_allocator,
                      /*resizable=*/true);
}

// A CPU view of device memory: same bytes, the device storage kept alive by the deleter context.
// The alias storage is resizable through the CPU allocator: if a CPU kernel grows it, the new bytes
// live in host memory and are copied back into the device storage afterwards.
struct AliasCtx {
  c10::intrusive_ptr<c10::StorageImpl> device_storage;
};
void delete_alias(void* ctx) {
  delete static_cast<AliasCtx*>(ctx);
}

// A tensor on `storage` under dispatch key `key` with `like`'s dtype, geometry and conj/neg bits:
// the one way the simulator re-labels memory between the CPU and the device.
at::Tensor tensor_like(c10::Storage storage, c10::DispatchKey key, const at::Tensor& like) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(key),
                                                   like.dtype());
  impl->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  at::Tensor out(std::move(impl));
  if (like.is_conj()) {
    out._set_conj(true);
  }
  if (like.is_neg()) {
    out._set_neg(true);
  }
  return out;
}

at::Tensor cpu_alias(const at::Tensor& t) {
  const c10::Storage& st = t.storage();
  auto* ctx = new AliasCtx{c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(st.unsafeGetStorageImpl())};
  c10::DataPtr ptr(st.mutable_data(), ctx, &delete_alias, c10::Device(c10::kCPU));
  c10::Storage cpu_storage(c10::Storage::use_byte_size_t(), st.nbytes(), std::move(ptr),
                           c10::GetCPUAllocator(), /*resizable=*/true);
  return tensor_like(std::move(cpu_storage), c10::DispatchKey::CPU, t);
}

at::Tensor wrap_device(const c10::Storage& storage, const at::Tensor& like) {
  return tensor_like(c10::Storage(storage), c10::DispatchKey::PrivateUse1, like);
}

// ---------------------------------------------------------------- streams and events
// Work runs synchronously on the host, so every stream is idle and every recorded event complete;
// what the simulator keeps is the bookkeeping code written for accelerators relies on: distinct
// streams (id 0 is a device's default stream), a current stream per thread and device, priorities,
// and events that carry the host time they were recorded at (elapsed_time measures host work).
// A new stream's id is (serial << 3) | -priority, priorities being clamped to 0 .. -7.
constexpr int kPriorityBits = 3;
constexpr int kLowestPriority = -((1 << kPriorityBits) - 1);
std::atomic<c10::StreamId> g_next_stream_serial{1};
thread_local std::array<c10::StreamId, kMaxDevices> t_current_stream{};  // 0: default stream

int stream_priority(c10::StreamId id) {
  return -static_cast<int>(id & ((1 << kPriorityBits) - 1));
}

c10::DeviceIndex device_index_of(c10::Device d) {
  TORCH_CHECK(d.type() == kNpu, "npu (simulated): expected an npu device, got ", d);
  const auto idx = d.has_index() ? d.index() : t_current_device;
  TORCH_CHECK(idx >= 0 && idx < device_count_value(), "npu (simulated): invalid device index ",
              static_cast<int>(idx), "; ", device_count_value(), " devices exist");
  return idx;
}

c10::Stream make_stream(c10::DeviceIndex idx, c10::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, idx), id);
}

c10::Stream new_stream(c10::Device d, int priority) {
  const int clamped = std::clamp(priority, kLowestPriority, 0);
  const c10::StreamId serial = g_next_stream_serial.fetch_add(1);
  return make_stream(device_index_of(d), (serial << kPriorityBits) | -clamped);
}

void check_stream(const c10::Stream& s) {
  TORCH_CHECK(s.device_type() == kNpu, "npu (simulated): expected an npu stream, got one on ",
              s.device());
  device_index_of(s.device());
}

struct SimEvent {
  c10::DeviceIndex device;
  std::chrono::steady_clock::time_point recorded_at;
};

// ---------------------------------------------------------------- device guard
struct NpuGuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNpu; }
  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = getDevice();
    setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kNpu, t_current_device); }
  void setDevice(c10::Device d) const override { t_current_device = device_index_of(d); }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.has_index() && d.index() >= 0 && d.index() < device_count_value()) {
      t_current_device = d.index();
    }
  }
  c10::Stream getStream(c10::Device d) const override {
    const auto idx = device_index_of(d);
    return make_stream(idx, t_current_stream[idx]);
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return make_stream(device_index_of(d), 0);
  }
  c10::Stream getNewStream(c10::Device d, int priority) const override {
    return new_stream(d, priority);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high) const override {
    return new_stream(d, high ? -1 : 0);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    check_stream(s);
    const auto idx = s.device_index();
    const auto old = make_stream(idx, t_current_stream[idx]);
    t_current_stream[idx] = s.id();
    return old;
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(device_count_value());
  }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex idx,
              const c10::EventFlag /*flag*/) const override {
    check_stream(stream);
    TORCH_CHECK(idx == -1 || idx == stream.device_index(), "Event device index ",
                static_cast<int>(idx), " does not match recording stream's device index ",
                static_cast<int>(stream.device_index()), ".");
    if (*event == nullptr) {
      *event = new SimEvent{stream.device_index(), {}};
    }
    auto* e = static_cast<SimEvent*>(*event);
    e->device = stream.device_index();
    e->recorded_at = std::chrono::steady_clock::now();
  }
  void block(void* /*event*/, const c10::Stream& stream) const override { check_stream(stream); }
  bool queryEvent(void* /*event*/) const override { return true; }
  void destroyEvent(void* event, const c10::DeviceIndex /*idx*/) const noexcept override {
    delete static_cast<SimEvent*>(event);
  }
  bool queryStream(const c10::Stream& stream) const override {
    check_stream(stream);
    return true;
  }
  void synchronizeStream(const c10::Stream& stream) const override { check_stream(stream); }
  void synchronizeEvent(void* /*event*/) const override {}
  void synchronizeDevice(const c10::DeviceIndex /*idx*/) const override {}
  void recordDataPtrOnStream(const c10::DataPtr& /*ptr*/, const c10::Stream& /*s*/) const override {}
  double elapsedTime(void* a, void* b, const c10::DeviceIndex /*idx*/) const override {
    TORCH_CHECK(a && b, "Both events must be recorded before calculating elapsed time.");
    const auto* start = static_cast<const SimEvent*>(a);
    const auto* end = static_cast<const SimEvent*>(b);
    return std::chrono::duration<double, std::milli>(end->recorded_at - start->recorded_at).count();
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NpuGuardImpl);

// ---------------------------------------------------------------- pinned host memory
std::mutex g_pinned_mutex;
std::unordered_set<const void*> g_pinned;

void delete_pinned(void* p) {
  {
    std::lock_guard<std::mutex> lock(g_pinned_mutex);
    g_pinned.erase(p);
  }
  std::free(p);
}

struct PinnedAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    void* p = n ? std::aligned_alloc(64, (n + 63) & ~size_t(63)) : nullptr;
    TORCH_CHECK(n == 0 || p, "npu (simulated): out of pinned host memory");
    if (p) {
      std::lock_guard<std::mutex> lock(g_pinned_mutex);
      g_pinned.insert(p);
    }
    return {p, p, &delete_pinned, c10::Device(c10::kCPU)};
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};
PinnedAllocator g_pinned_allocator;

// ---------------------------------------------------------------- hooks
struct NpuHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  // Random numbers come from the CPU generator, so a seeded npu run draws the same numbers as a
  // seeded CPU run: conformance compares like with like.
  const at::Generator& getDefaultGenerator(c10::DeviceIndex /*idx*/) const override {
    return at::detail::getDefaultCPUGenerator();
  }
  at::Generator getNewGenerator(c10::DeviceIndex /*idx*/) const override {
    return at::detail::createCPUGenerator();
  }
  at::Device getDeviceFromPtr(void* /*data*/) const override {
    return c10::Device(kNpu, t_current_device);
  }
  bool isPinnedPtr(const void* data) const override {
    std::lock_guard<std::mutex> lock(g_pinned_mutex);
    return g_pinned.count(data) > 0;
  }
  c10::Allocator* getPinnedMemoryAllocator() const override { return &g_pinned_allocator; }
  bool hasPrimaryContext(c10::DeviceIndex /*idx*/) const override { return true; }
  void init() const override {}
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_bytes(storage.unsafeGetStorageImpl(), newsize);
  }
  static void resize_bytes(c10::StorageImpl* storage, size_t newsize) {
    TORCH_CHECK(storage->resizable(), "npu (simulated): storage is not resizable");
    const auto dev = storage->device().index();
    c10::DeviceIndex saved = t_current_device;
    t_current_device = dev;
    c10::DataPtr fresh = g_allocator.allocate(newsize);
    t_current_device = saved;
    const size_t keep = std::min(newsize, storage->nbytes());
    if (keep) {
      std::memcpy(fresh.get(), storage->data(), keep);
    }
    storage->set_data_ptr_noswap(std::move(fresh));
    storage->set_nbytes(newsize);
  }
};

// ---------------------------------------------------------------- native kernels
// The device of an empty_* call, once its layout and pinning are ones the simulator can give.
c10::Device empty_device(std::optional<c10::Device> device, std::optional<c10::Layout> layout,
                         std::optional<bool> pin_memory) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "npu (simulated): only strided tensors are supported");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory),
              "npu (simulated): only CPU memory can be pinned");
  return c10::device_or_default(device);
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  c10::DeviceGuard guard(empty_device(device, layout, pin_memory));
  return at::detail::empty_generic(size, &g_allocator,
                                   c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  c10::DeviceGuard guard(empty_device(device, layout, pin_memory));
  return at::detail::empty_strided_generic(size, stride, &g_allocator,
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           c10::dtype_or_default(dtype));
}

at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) {
  return at::native::view(self, size);
}

at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  // Metadata first (no storage growth), then grow the device storage with our allocator.
  at::native::resize_impl_cpu_(impl, size, /*stride=*/std::nullopt, /*resize_storage=*/false);
  if (memory_format.has_value() && *memory_format != c10::MemoryFormat::Preserve) {
    impl->empty_tensor_restride(*memory_format);
  }
  if (impl->numel() > 0) {
    int64_t max_index = 0;
    for (size_t i = 0; i < size.size(); ++i) {
      max_index += (size[i] - 1) * impl->strides()[i];
    }
    const size_t bytes = static_cast<size_t>(impl->storage_offset() + max_index + 1) *
                         self.dtype().itemsize();
    const auto& storage = impl->unsafe_storage();
    if (bytes > storage.nbytes()) {
      NpuHooks::resize_bytes(storage.unsafeGetStorageImpl(), bytes);
    }
  }
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, int64_t storage_offset,
                        c10::IntArrayRef size, c10::IntArrayRef stride) {
  TORCH_CHECK(source.device().type() == kNpu || source.nbytes() == 0,
              "npu (simulated): set_ expects an npu storage, got one on ", source.device());
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(source));
  if (stride.empty()) {
    const auto contiguous = c10::contiguous_strides(size);
    impl->set_sizes_and_strides(size, contiguous, storage_offset);
  } else {
    impl->set_sizes_and_strides(size, stride, storage_offset);
  }
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  const int64_t n = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage(self, std::move(source), 0, {n}, {});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.unsafeGetTensorImpl() == source.unsafeGetTensorImpl()) {
    return self;
  }
  return set_storage(self, source.storage(), source.storage_offset(), source.sizes(),
                     source.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, &g_allocator, /*resizable=*/true);
  return set_storage(self, std::move(empty), 0, {0}, {});
}

// Copies between the device and the host, or within the device: CPU copy on aliases.
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(self.defined() && dst.defined(), "npu (simulated): copy of an undefined tensor");
  const at::Tensor src_cpu = self.device().type() == kNpu ? cpu_alias(self) : self;
  at::Tensor dst_cpu = dst.device().type() == kNpu ? cpu_alias(dst) : dst;
  dst_cpu.copy_(src_cpu, non_blocking);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.device().type() == kNpu) {
    resize_(dst, self.sizes(), std::nullopt);
  } else {
    dst.resize_(self.sizes());
  }
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  return cpu_alias(self).item();
}

// Kernels finish before they return, so no use of the memory on a stream can outlive the tensor:
// there is nothing to record. The stream is checked as a device's caching allocator checks it.
void record_stream(at::Tensor& self, c10::Stream s) {
  TORCH_CHECK(s.device_type() == kNpu, "npu (simulated): record_stream of an npu tensor expects ",
              "an npu stream, got a stream of ", s.device());
  (void)self;
}

// ---------------------------------------------------------------- the fallback
struct AliasRecord {
  at::Tensor device;  // the npu tensor given by the caller
  at::Tensor cpu;     // its CPU alias handed to the CPU kernel
  bool written;       // schema marks the argument as written (in-place or out=)
};

bool is_npu(const at::Tensor& t) {
  return t.defined() && t.device().type() == kNpu;
}

// Ops whose CPU index arguments a real accelerator also accepts (it moves them itself).
bool accepts_cpu_indices(const c10::OperatorName& name) {
  static const std::unordered_set<std::string> ops = {"aten::index", "aten::index_put_",
                                                      "aten::_index_put_impl_", "aten::index_put"};
  return ops.count(name.name) > 0;
}

void check_devices(const c10::OperatorHandle& op, const std::vector<at::Tensor>& tensors) {
  std::optional<c10::Device> npu_dev;
  std::optional<c10::Device> cpu_dev;
  for (const auto& t : tensors) {
    if (!t.defined()) {
      continue;
    }
    if (t.device().type() == kNpu) {
      if (npu_dev && *npu_dev != t.device()) {
        TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two "
                           "devices, ", *npu_dev, " and ", t.device(), "! (when calling ",
                    op.schema().operator_name(), ")");
      }
      npu_dev = t.device();
    } else if (t.device().type() == c10::kCPU && t.dim() > 0) {
      cpu_dev = t.device();
    }
  }
  if (npu_dev && cpu_dev && !accepts_cpu_indices(op.schema().operator_name())) {
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two "
                       "devices, ", *npu_dev, " and cpu! (when calling ",
                op.schema().operator_name(), ")");
  }
}

void fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t num_args = schema.arguments().size();
  const size_t first = stack->size() - num_args;

  std::vector<AliasRecord> aliases;
  std::vector<at::Tensor> seen;
  std::optional<c10::Device> target;

  auto alias_of = [&](const at::Tensor& t, bool written) -> at::Tensor {
    if (!is_npu(t)) {
      return t;
    }
    if (!target) {
      target = t.device();
    }
    at::Tensor a = cpu_alias(t);
    aliases.push_back({t, a, written});
    return a;
  };

  // Pass 1: device check on the caller's tensors.
  for (size_t i = 0; i < num_args; ++i) {
    const c10::IValue& iv = (*stack)[first + i];
    if (iv.isTensor()) {
      seen.push_back(iv.toTensor());
    } else if (iv.isTensorList()) {
      for (const at::Tensor& t : iv.toTensorList()) {
        seen.push_back(t);
      }
    } else if (iv.isOptionalTensorList()) {
      for (const std::optional<at::Tensor>& t : iv.toOptionalTensorList()) {
        if (t.has_value()) {
          seen.push_back(*t);
        }
      }
    }
  }
  check_devices(op, seen);

  // Pass 2: swap npu tensors for CPU aliases, npu devices for the CPU.
  for (size_t i = 0; i < num_args; ++i) {
    c10::IValue& iv = (*stack)[first + i];
    const auto* info = schema.arguments()[i].alias_info();
    const bool written = info && info->isWrite();
    if (iv.isTensor()) {
      iv = alias_of(iv.toTensor(), written);
    } else if (iv.isTensorList()) {
      auto list = iv.toTensorList();
      c10::List<at::Tensor> out;
      out.reserve(list.size());
      for (const at::Tensor& t : list) {
        out.push_back(alias_of(t, written));
      }
      iv = std::move(out);
    } else if (iv.isOptionalTensorList()) {
      auto list = iv.toOptionalTensorList();
      c10::List<std::optional<at::Tensor>> out;
      out.reserve(list.size());
      for (const std::optional<at::Tensor>& t : list) {
        out.push_back(t.has_value() ? std::optional<at::Tensor>(alias_of(*t, written)) : t);
      }
      iv = std::move(out);
    } else if (iv.isDevice() && iv.toDevice().type() == kNpu) {
      if (!target) {
        target = iv.toDevice();
      }
      iv = c10::IValue(c10::Device(c10::kCPU));
    }
  }
  if (!target) {
    target = c10::Device(kNpu, t_current_device);
  }
  const c10::DeviceIndex dev = target->has_index() ? target->index() : t_current_device;

  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);

  // Written arguments whose CPU kernel reallocated or reshaped them: bring the device tensor along.
  for (auto& rec : aliases) {
    if (!rec.written) {
      continue;
    }
    auto* dimpl = rec.device.unsafeGetTensorImpl();
    const c10::Storage& cst = rec.cpu.storage();
    if (cst.data() != rec.device.storage().data() || cst.nbytes() != rec.device.storage().nbytes()) {
      auto* dst = rec.device.storage().unsafeGetStorageImpl();
      if (dst->nbytes() < cst.nbytes()) {
        NpuHooks::resize_bytes(dst, cst.nbytes());
      }
      if (cst.nbytes() && cst.data() != dst->data()) {
        std::memcpy(dst->mutable_data(), cst.data(), cst.nbytes());
      }
    }
    if (rec.cpu.sizes() != rec.device.sizes() || rec.cpu.strides() != rec.device.strides() ||
        rec.cpu.storage_offset() != rec.device.storage_offset()) {
      dimpl->set_sizes_and_strides(rec.cpu.sizes(), rec.cpu.strides(), rec.cpu.storage_offset());
    }
  }

  // Map the CPU results back to the device: the caller's own tensor for a returned argument, a view
  // of the caller's storage for a returned view, an adopted storage for a fresh result.
  std::unordered_map<const c10::StorageImpl*, c10::Storage> storages;
  for (const auto& rec : aliases) {
    storages.emplace(rec.cpu.storage().unsafeGetStorageImpl(), rec.device.storage());
  }
  auto to_device = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined() || t.device().type() != c10::kCPU) {
      return t;
    }
    for (const auto& rec : aliases) {
      if (rec.cpu.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) {
        return rec.device;
      }
    }
    const auto* key = t.storage().unsafeGetStorageImpl();
    auto it = storages.find(key);
    if (it == storages.end()) {
      it = storages.emplace(key, adopt(t.storage(), dev)).first;
    }
    return wrap_device(it->second, t);
  };

  const size_t num_returns = schema.returns().size();
  const size_t ret_first = stack->size() - num_returns;
  for (size_t i = 0; i < num_returns; ++i) {
    c10::IValue& iv = (*stack)[ret_first + i];
    if (iv.isTensor()) {
      iv = to_device(iv.toTensor());
    } else if (iv.isTensorList()) {
      auto list = iv.toTensorList();
      c10::List<at::Tensor> out;
      out.reserve(list.size());
      for (const at::Tensor& t : list) {
        out.push_back(to_device(t));
      }
      iv = std::move(out);
    }
  }
}

// convolution_overrideable is where ATen sends convolutions of backends it does not know; its
// default kernel throws, so the fallback never sees it. Run the CPU convolution on aliases.
at::Tensor adopt_result(const at::Tensor& t, c10::DeviceIndex dev) {
  return t.defined() ? wrap_device(adopt(t.storage(), dev), t) : t;
}

at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                                    c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                    bool transposed, c10::IntArrayRef output_padding,
                                    int64_t groups) {
  std::optional<at::Tensor> b;
  if (bias.has_value() && bias->defined()) {
    b = cpu_alias(*bias);
  }
  at::Tensor out = at::convolution(cpu_alias(input), cpu_alias(weight), b, stride, padding,
                                   dilation, transposed, output_padding, groups);
  return adopt_result(out.contiguous(), input.device().index());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
    c10::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask) {
  std::vector<int64_t> bias_sizes = {weight.size(transposed ? 1 : 0) * (transposed ? groups : 1)};
  auto [gi, gw, gb] = at::convolution_backward(
      cpu_alias(grad_output), cpu_alias(input), cpu_alias(weight), bias_sizes, stride, padding,
      dilation, transposed, output_padding, groups, output_mask);
  const auto dev = input.device().index();
  return {adopt_result(gi, dev), adopt_result(gw, dev), adopt_result(gb, dev)};
}

// ---------------------------------------------------------------- registration
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", as_strided);
  m.impl("view", view);
  m.impl("_reshape_alias", reshape_alias);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage_storage_offset", set_storage);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("set_", set_empty);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("record_stream", record_stream);
  m.impl("convolution_overrideable", convolution_overrideable);
  m.impl("convolution_backward_overrideable", convolution_backward_overrideable);
}

// Copies with a conjugate or negative source must reach copy_from, which keeps the bits on its CPU
// alias and lets the CPU copy resolve them; the math fallbacks would clone, which copies, which
// lands here again, forever.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>());
}

// ---------------------------------------------------------------- control ops for Python
std::vector<int64_t> memory_stats(int64_t device) {
  TORCH_CHECK(device >= 0 && device < device_count_value(), "npu (simulated): invalid device ",
              device);
  const auto& s = g_stats[device];
  return {s.allocated.load(), s.peak.load(), s.num_allocs.load()};
}

void reset_peak(int64_t device) {
  TORCH_CHECK(device >= 0 && device < device_count_value(), "npu (simulated): invalid device ",
              device);
  g_stats[device].peak.store(g_stats[device].allocated.load());
}

int64_t stream_priority_of(int64_t stream_id) { return stream_priority(stream_id); }

int64_t device_count() { return device_count_value(); }
int64_t current_device() { return t_current_device; }
void set_device(int64_t device) {
  NpuGuardImpl().setDevice(c10::Device(kNpu, static_cast<c10::DeviceIndex>(device)));
}
bool is_pinned(const at::Tensor& t) {
  return NpuHooks().isPinnedPtr(t.storage().data());
}

struct Registrar {
  Registrar() { at::RegisterPrivateUse1HooksInterface(new NpuHooks()); }
};
Registrar g_registrar;

TORCH_LIBRARY(npu_sim, m) {
  m.def("memory_stats(int device) -> int[]", memory_stats);
  m.def("reset_peak(int device) -> ()", reset_peak);
  m.def("device_count() -> int", device_count);
  m.def("current_device() -> int", current_device);
  m.def("set_device(int device) -> ()", set_device);
  m.def("is_pinned(Tensor t) -> bool", is_pinned);
  m.def("stream_priority(int stream_id) -> int", stream_priority_of);
}

}  // namespace npu_sim
