@_spi(Reflection) import Swift
import FerryModel
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The serial queue a task's URLSession runs its own work on (`URLSessionTask.workQueue`, internal).
///
/// A `URLProtocol` must call its client on that queue: corelibs' client looks the task up in the session's
/// task registry, a dictionary the session changes on that queue only, with no lock; a call from another
/// thread races with every task being made or finished. corelibs' own protocols only ever call from there,
/// and the property is not public, so it is found by name in the type's field metadata: a `let`, read
/// once per task without copying any other field. Pinned by TransportTests.
enum TaskWorkQueue {
    // `_EachFieldOptions.classType` is a static var (not concurrency-safe): its raw value, 1, is spelled out.
    private static let offset: Int? = {
        var found: Int?
        _ = _forEachField(of: URLSessionTask.self, options: _EachFieldOptions(rawValue: 1)) { name, offset, type, _ in
            guard String(cString: name) == "workQueue", type == DispatchQueue.self else { return true }
            found = offset
            return false
        }
        return found
    }()

    static func of(_ task: URLSessionTask) -> DispatchQueue? {
        guard let offset else { return nil }
        return Unmanaged.passUnretained(task).toOpaque().advanced(by: offset).load(as: DispatchQueue.self)
    }
}
