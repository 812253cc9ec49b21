@testable import FerryCore
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
@testable import FerryTransport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// FerryURLProtocol reports to URLSession on the task's own work queue (corelibs' client reads the session's
/// task registry without a lock; see TaskWorkQueue). The queue is found in Foundation's field metadata:
/// this fails first if a Foundation release renames or retypes it.
@Suite struct TaskWorkQueueTests {
    @Test func theWorkQueueOfEveryKindOfTaskIsFound() throws {
        let session = URLSession(configuration: .keepingNothing)
        defer { session.invalidateAndCancel() }
        let request = URLRequest(url: URL(string: "http://127.0.0.1:9/")!)
        let tasks: [URLSessionTask] = [session.dataTask(with: request), session.uploadTask(withStreamedRequest: request)]
        for task in tasks {
            let queue = try #require(TaskWorkQueue.of(task))
            #expect(queue.label == "org.swift.URLSessionTask.WorkQueue")
        }
    }
}
