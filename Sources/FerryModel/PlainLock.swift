#if canImport(Glibc)
import Glibc
#endif

/// A value behind a lock that waits the way most locks do: glibc's adaptive mutex, which spins a little, then
/// sleeps on a plain futex. The standard library's `Mutex` takes a priority-inheritance futex on Linux, whose
/// contended path goes through the kernel's rt_mutex: where many threads take one lock for short turns (the
/// engine's core, taken by every task's events), that path was 8 % of a 2,000-file run's samples (perf).
/// Not reentrant: `withLock` inside `withLock` on one thread waits for ever (Mutex stops the process instead).
public final class PlainLock<Value>: @unchecked Sendable {
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline var value: Value

    public init(_ value: sending Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    @inlinable
    public func withLock<Result, Failure: Error>(_ body: (inout sending Value) throws(Failure) -> sending Result) throws(Failure) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
