import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension URLSessionConfiguration {
    /// `.default` with nothing kept: no cache, cookies or credentials, and no directory made for them.
    ///
    /// corelibs makes `URLCache.shared` when the first session configuration is made, whatever cache the session
    /// then uses, and with it a directory named after the program under the user's cache directory
    /// (~/.cache/org.swift.foundation.URLCache/ferry), on every run; `.ephemeral` makes one more cache the same
    /// way. Here the shared cache is one that keeps nothing, in a directory that exists, before `.default` is
    /// asked for. (corelibs' shared cookie storage, made the same way and with no setter, still makes
    /// ~/.local/share/NAME, NAME the binary's directory, when that is missing.) ferry's session and the tests'
    /// own sessions start from this.
    package static var keepingNothing: URLSessionConfiguration {
        _ = sharedCacheKeepsNothing
        let configuration = URLSessionConfiguration.default
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.urlCredentialStorage = nil
        return configuration
    }

    private static let sharedCacheKeepsNothing: Void = {
        URLCache.shared = URLCache(memoryCapacity: 0, diskCapacity: 0, diskPath: FileManager.default.temporaryDirectory.path)
    }()
}
