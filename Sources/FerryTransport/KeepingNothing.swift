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
    /// asked for. (corelibs' shared cookie storage is made the same way and has no setter: see
    /// `SharedStores.makeCookieStorageWithoutADirectory`, which the program calls as it starts.) ferry's session and
    /// the tests' own sessions start from this.
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

/// corelibs' shared stores, made so that they keep nothing and leave nothing behind.
package enum SharedStores {
    /// Makes corelibs' shared cookie storage (`HTTPCookieStorage.shared`, which every `.default` configuration
    /// takes, and which ferry's session then drops) without the directory it makes for its file: on every run it
    /// made `$XDG_DATA_HOME/NAME` (~/.local/share/NAME), NAME the last part of the directory holding the binary,
    /// so that ferry in /usr/local/bin left ~/.local/share/bin behind. It makes that directory under the
    /// user's data directory as `XDG_DATA_HOME` names it when it is made, and there is no other way to tell it;
    /// so `XDG_DATA_HOME` names a place no directory can be made in (not even by root: /dev/null is no
    /// directory) while the storage is made, and is then put back as it was (a hook's process gets the user's).
    /// Without its directory the storage names a file under the current directory instead; ferry's session takes
    /// no cookie storage, so nothing is ever written there.
    ///
    /// Call it first thing in the program, while no other thread reads the environment (setting it while
    /// another thread reads it is a race glibc does not guard).
    package static func makeCookieStorageWithoutADirectory() {
        let name = "XDG_DATA_HOME"
        // The bytes as they are (a String would replace what is not UTF-8).
        let saved = getenv(name).flatMap { strdup($0) }
        defer { free(saved) }
        setenv(name, "/dev/null/ferry-keeps-no-cookies", 1)
        _ = HTTPCookieStorage.shared
        if let saved { setenv(name, saved, 1) } else { unsetenv(name) }
    }
}
