import Foundation

/// What a front end needs of an engine: its queue as snapshots, and the commands. The engine in this
/// process (TransferManager) and one behind a control socket (RemoteQueue) both answer it, so the UI does
/// not know, and never opens a socket itself.
public protocol QueueControl: AnyObject, Sendable {
    func snapshot() -> QueueSnapshot
    /// Queues a transfer; its id, or nil when the engine could not be reached.
    func enqueue(_ spec: TransferSpec) -> TransferID?
    func pause(_ id: TransferID)
    func resume(_ id: TransferID)
    func cancel(_ id: TransferID)
    func retry(_ id: TransferID)
    func remove(_ id: TransferID, deletePartial: Bool)
    func move(_ id: TransferID, _ direction: QueueMove)
    func setConcurrency(maxConcurrent: Int)
    func pauseAll()
    func resumeAll()
    @discardableResult func setRateLimit(_ id: TransferID, _ rate: Int64?) -> Bool
    func setGlobalLimits(download: Int64?, upload: Int64?)
    /// The front end goes; the transfers go on (a remote engine) or stop (this process's engine).
    func detach()
    /// Stops the engine and its transfers (their `.part` files stay).
    func stopEngine()
}

extension TransferManager: QueueControl {
    public func enqueue(_ spec: TransferSpec) -> TransferID? { add(spec) }
    public func detach() { shutdown(timeout: 5) }
    public func stopEngine() { shutdown(timeout: 5) }
}
