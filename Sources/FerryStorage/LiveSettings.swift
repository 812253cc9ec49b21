import FerryModel
import Foundation

/// The engine's settings changed while it ran (transfers at once: `+`/`-`, `ferry jobs`; the global limits:
/// `L`), kept in the state directory so that the next engine starts with them: the last value chosen wins
/// (a change while running, or `-j` when an engine starts), and the config file's is the default under it.
public struct LiveSettings: Codable, Equatable, Sendable {
    public var concurrency: Int?
    public var concurrencyChangedAt: Date?
    /// Both global limits, as last set (nil inside: none).
    public var limits: Limits?
    public var limitsChangedAt: Date?

    public struct Limits: Codable, Equatable, Sendable {
        public var download: Int64?
        public var upload: Int64?
        public init(download: Int64?, upload: Int64?) {
            self.download = download
            self.upload = upload
        }
    }

    public init() {}

    /// What `path` holds; none when it is missing. A file that cannot be read is said once on stderr by the
    /// caller (`problem`) and taken as none: a setting is not worth refusing to start over.
    public static func load(_ path: String) -> (settings: LiveSettings, problem: String?) {
        guard let data = FileManager.default.contents(atPath: path) else { return (LiveSettings(), nil) }
        do {
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            return (try decoder.decode(LiveSettings.self, from: data), nil)
        } catch {
            return (LiveSettings(), "\(path) is not ferry's settings file; the config's values are used")
        }
    }

    /// Changes what `path` holds (written whole, then renamed over it: never half a file).
    public static func update(_ path: String, _ change: (inout LiveSettings) -> Void) {
        var settings = load(path).settings
        change(&settings)
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        guard let data = try? encoder.encode(settings) else { return }
        let temporary = path + ".new"
        guard FileManager.default.createFile(atPath: temporary, contents: data, attributes: [.posixPermissions: 0o600]) else { return }
        _ = rename(temporary, path)
    }
}

extension StateDirectory {
    /// LiveSettings' file.
    public var liveSettingsPath: String { path + "/settings.json" }
}
