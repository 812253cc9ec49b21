public enum TestServerPlaceholder {}
