import FerryModel
import FerryStorage
import FerryTransport
import Foundation

/// The knobs of the engine. The config file and the command line fill it; defaults are the documented ones.
public struct EngineConfiguration: Sendable, Equatable {
    /// Transfers running at once (`-j`).
    public var maxConcurrent = 4
    /// Transfers running at once against one host, when lower than `maxConcurrent`; nil (or not lower)
    /// means it follows `maxConcurrent` (see ConcurrencyCaps).
    public var maxPerHost: Int?

    /// The caps these settings give.
    public var caps: ConcurrencyCaps { ConcurrencyCaps(global: maxConcurrent, perHost: maxPerHost) }
    public var retry = RetryPolicy()
    /// Seconds without a byte (or without a connection) before an attempt is given up.
    public var idleTimeout: TimeInterval = 30
    public var userAgent = "ferry/0.1"
    /// Whether failed uploads are retried at all (PUT like downloads; POST only when the server cannot have acted).
    public var retryUploads = true
    /// A raw file's upload offers the IETF resumable-upload protocol (`[uploads] resumable`; tus, asked for
    /// by the item, is spoken whatever this says).
    public var offerResumableUploads = true
    /// The chunks of a resumable upload (tus, and IETF appends; `[uploads] chunk`), unless the config's
    /// `[[hosts]] upload_chunk` sets a matching host's (UploadChunking).
    public var uploadChunking = UploadChunking.standard
    /// Where `UploadSource.standardInput` reads from.
    public var standardInputPath = "/dev/stdin"
    /// Global bandwidth limits in bytes per second (nil: none); changed live with `TransferManager.setGlobalLimits`.
    public var downloadLimit: Int64?
    public var uploadLimit: Int64?
    /// A timetable for the global download limit (it wins over `downloadLimit` while it is set).
    public var downloadSchedule: LimitSchedule?
    /// Proxies and trusted CAs for the transport (the environment as curl reads it, and `[network] ca_file`).
    public var transport = TransportSettings()
    /// Headers from the config file, each sent to its matching host only (never after a redirect elsewhere).
    public var hostHeaders: [HostHeaders] = []

    /// The chunks of a resumable upload to `host`: the first matching `[[hosts]]` entry's that sets them, else
    /// `uploadChunking`.
    public func uploadChunking(for host: String) -> UploadChunking {
        hostHeaders.first { $0.uploadChunk != nil && $0.matches(host: host) }?.uploadChunk ?? uploadChunking
    }
    /// Chunks are coalesced into writes of this size (per attempt and per segment). 256 KiB is 16 of
    /// URLSession's chunks per write(2) and stays in a core's L2 cache; 1 MiB was no faster and cost
    /// 0.75 MiB more RSS per running download (6 MiB more for 8 segments).
    public var writeBufferSize = 256 << 10
    /// Store writes begin at most this often. A change after a quiet spell is written at once; in a burst
    /// (a thousand small files) the changes of each interval share one transaction instead of one each,
    /// which is most of what the store costs (a commit is ~15 WAL writes and ~10 lock calls). What is
    /// pending is written at shutdown.
    public var storeWriteInterval: TimeInterval = 0.02
    /// Idle items (queued, paused or finished) kept loaded besides those running or waiting for a retry; the
    /// rest of the queue stays in the store. Only what a front end shows of a finished item that the store
    /// does not keep (a server's answer to an upload, a rate history) goes with an item that leaves memory.
    public var loadedLimit = 1_024
    /// Where changes of transfers at once and of the global limits made while running are kept for the next
    /// engine (LiveSettings); nil: not kept (a private queue).
    public var liveSettingsPath: String?

    public init() {}
}
