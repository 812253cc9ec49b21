import FerryCore
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

// One URLSession alone in a process, as in ferry (every session of a process shares one socket thread on
// Linux, so a test process full of engines would measure them all), with a delegate that takes 2 ms per
// chunk, as a slow disk would. Prints what DelegateQueueTests checks:
//   DelegateQueueProbe plain|bounded|cancel|make URL  ->  "peak=N bytes=N error=N limit=N timedout=N"
// plain: a serial OperationQueue; bounded: ferry's queue and limit; cancel: a queue of 16 and a cancel
// from the delegate queue once 4 MiB arrived; make: a queue of 16 and, once 4 MiB arrived, a second task
// (a HEAD of the same URL) made and resumed from the delegate queue as the engine makes its tasks.
// (`bytes` counts the first task's body, `error` is its error.)

final class SlowDelegate: NSObject, URLSessionDataDelegate, Sendable {
    enum Action { case cancel, make }
    let action: Action
    let cancelAfter: Int?
    let bytes = Atomic<Int>(0)
    let peakQueued = Atomic<Int>(0)
    let error = Atomic<Int>(0)
    let done = DispatchSemaphore(value: 0)

    let delay: UInt32

    init(cancelAfter: Int?, action: Action = .cancel, delayMicroseconds: UInt32 = 2000) {
        self.cancelAfter = cancelAfter
        self.action = action
        delay = delayMicroseconds
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let queued = session.delegateQueue.operationCount
        if queued > peakQueued.load(ordering: .relaxed) { peakQueued.store(queued, ordering: .relaxed) }
        let total = bytes.add(data.count, ordering: .relaxed).newValue
        if delay > 0 { usleep(delay) }
        guard let cancelAfter, total >= cancelAfter, total - data.count < cancelAfter else { return }
        switch action {
        case .cancel:
            BoundedDelegateQueue.cancel(dataTask)  // from the delegate queue, as the engine's runs do
        case .make:
            var head = URLRequest(url: dataTask.originalRequest!.url!)
            head.httpMethod = "HEAD"
            _ = SessionTask.make({ [head] in session.dataTask(with: head) }) { $0.resume() }
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        if task.originalRequest?.httpMethod != "HEAD" {
            self.error.store(error.map { ($0 as NSError).code } ?? 0, ordering: .relaxed)
        }
        done.signal()
    }
}

let arguments = CommandLine.arguments
guard arguments.count == 3, ["plain", "bounded", "cancel", "make"].contains(arguments[1]), let url = URL(string: arguments[2]) else {
    FileHandle.standardError.write(Data("usage: DelegateQueueProbe plain|bounded|cancel|make URL\n".utf8))
    exit(2)
}
let mode = arguments[1]
let queue: OperationQueue
switch mode {
case "plain":
    queue = OperationQueue()
    queue.maxConcurrentOperationCount = 1
case "bounded":
    queue = BoundedDelegateQueue(limit: TransferManager.delegateQueueLimit, name: "probe")
default:
    queue = BoundedDelegateQueue(limit: 16, name: "probe")
}
let delegate = SlowDelegate(cancelAfter: mode == "cancel" || mode == "make" ? 4 << 20 : nil,
                            action: mode == "make" ? .make : .cancel)
let session = URLSession(configuration: .ephemeral, delegate: delegate, delegateQueue: queue)
session.dataTask(with: url).resume()
delegate.done.wait()
if mode == "make" { delegate.done.wait() }  // the HEAD too
let peak = (queue as? BoundedDelegateQueue)?.peakPending ?? delegate.peakQueued.load(ordering: .relaxed)
let limit = (queue as? BoundedDelegateQueue)?.limit ?? 0
let timedOut = (queue as? BoundedDelegateQueue)?.timedOutWaits ?? 0
print("peak=\(peak) bytes=\(delegate.bytes.load(ordering: .relaxed)) error=\(delegate.error.load(ordering: .relaxed)) limit=\(limit)",
      "timedout=\(timedOut)")
