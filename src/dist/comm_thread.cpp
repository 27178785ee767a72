#include "comm_thread.hpp"

#include <chrono>

namespace crest::dist_detail {

CommThread::CommThread(double timeout_s, TimeoutHandler on_timeout)
    : timeout_s_(timeout_s), on_timeout_(std::move(on_timeout)), worker_([this] { loop(); }) {}

CommThread::~CommThread() {
  std::unique_lock lock(mu_);
  stopping_ = true;
  work_cv_.notify_all();
  const auto limit = std::chrono::duration<double>(timeout_s_);
  if (!done_cv_.wait_for(lock, limit, [&] { return exited_; })) {
    CommTask stuck;
    stuck.what = "the communication thread's shutdown";
    if (running_) stuck = *running_;
    lock.unlock();
    on_timeout_(stuck, timeout_s_);  // does not return
  }
  lock.unlock();
  worker_.join();
}

std::shared_ptr<CommTask> CommThread::submit(std::function<void()> fn, std::string what) {
  auto task = std::make_shared<CommTask>();
  task->run = std::move(fn);
  task->what = std::move(what);
  task->queued_at = steady_seconds();
  {
    std::lock_guard lock(mu_);
    task->sequence = next_sequence_++;
    queue_.push_back(task);
  }
  work_cv_.notify_one();
  return task;
}

void CommThread::wait(const std::shared_ptr<CommTask>& task, double grace_s) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto deadline = start + std::chrono::duration_cast<clock::duration>(
                                    std::chrono::duration<double>(timeout_s_ + grace_s));
  std::unique_lock lock(mu_);
  if (!done_cv_.wait_until(lock, deadline, [&] { return task->done; })) {
    const double waited = std::chrono::duration<double>(clock::now() - start).count();
    lock.unlock();
    on_timeout_(*task, waited);  // does not return
  }
  if (task->error) std::rethrow_exception(task->error);
}

void CommThread::run(std::function<void()> fn, std::string what) {
  wait(submit(std::move(fn), std::move(what)));
}

CommThread::Activity CommThread::activity() {
  std::lock_guard lock(mu_);
  Activity a;
  a.completed = completed_;
  if (running_) {
    a.running = running_->sequence;
    a.running_what = running_->what;
  }
  return a;
}

void CommThread::loop() {
  for (;;) {
    std::shared_ptr<CommTask> task;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) {  // stopping, and everything queued has run
        exited_ = true;
        done_cv_.notify_all();
        return;
      }
      task = queue_.front();
      queue_.pop_front();
      task->started = true;
      task->started_at = steady_seconds();
      running_ = task;
    }
    std::exception_ptr error;
    try {
      task->run();
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard lock(mu_);
      task->error = error;
      task->done = true;
      task->done_at = steady_seconds();
      running_.reset();
      ++completed_;
      task->run = nullptr;  // release captured buffers' owners early
    }
    done_cv_.notify_all();
  }
}

}  // namespace crest::dist_detail
