//! The styles of every part of the screen, in one place. With `NO_COLOR` set (any non-empty
//! value, <https://no-color.org>) no colour is used, only bold, dim, italic and reverse.

use ratatui::style::{Color, Modifier, Style};

/// The styles the views use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    /// Whether styles use colours (`--no-color` and `NO_COLOR` turn them off).
    pub color: bool,
}

impl Theme {
    /// Colour unless `no_color`.
    pub fn new(no_color: bool) -> Theme {
        Theme { color: !no_color }
    }

    /// Whether the environment asks for no colour (`NO_COLOR` set and not empty).
    pub fn no_color_requested(value: Option<&std::ffi::OsStr>) -> bool {
        value.is_some_and(|v| !v.is_empty())
    }

    fn fg(&self, color: Color) -> Style {
        if self.color {
            Style::default().fg(color)
        } else {
            Style::default()
        }
    }

    /// No styling.
    pub fn plain(&self) -> Style {
        Style::default()
    }

    /// Secondary text.
    pub fn dim(&self) -> Style {
        Style::default().add_modifier(Modifier::DIM)
    }

    /// Emphasis.
    pub fn bold(&self) -> Style {
        Style::default().add_modifier(Modifier::BOLD)
    }

    /// The person's prompts.
    pub fn user(&self) -> Style {
        self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }

    /// The model's thinking.
    pub fn thinking(&self) -> Style {
        self.dim().add_modifier(Modifier::ITALIC)
    }

    /// Inline code.
    pub fn code(&self) -> Style {
        self.fg(Color::Yellow)
    }

    /// A token of a highlighted code block; without colour the classes keep their weight
    /// (keywords bold, comments dim and italic).
    pub fn token(&self, token: crate::highlight::Token) -> Style {
        use crate::highlight::Token;
        match token {
            Token::Plain => self.plain(),
            Token::Keyword => self.fg(Color::Magenta).add_modifier(Modifier::BOLD),
            Token::Type => self.fg(Color::Cyan),
            Token::String => self.fg(Color::Green),
            Token::Number => self.fg(Color::Yellow),
            Token::Comment => self.dim().add_modifier(Modifier::ITALIC),
        }
    }

    /// Markdown headings.
    pub fn heading(&self) -> Style {
        self.fg(Color::Magenta).add_modifier(Modifier::BOLD)
    }

    /// Links.
    pub fn link(&self) -> Style {
        self.fg(Color::Blue).add_modifier(Modifier::UNDERLINED)
    }

    /// Tool names.
    pub fn tool(&self) -> Style {
        self.fg(Color::Blue).add_modifier(Modifier::BOLD)
    }

    /// Warnings.
    pub fn warning(&self) -> Style {
        self.fg(Color::Yellow).add_modifier(Modifier::BOLD)
    }

    /// Success.
    pub fn ok(&self) -> Style {
        self.fg(Color::Green)
    }

    /// Errors.
    pub fn error(&self) -> Style {
        self.fg(Color::Red).add_modifier(Modifier::BOLD)
    }

    /// Added diff lines.
    pub fn added(&self) -> Style {
        self.fg(Color::Green)
    }

    /// Removed diff lines.
    pub fn removed(&self) -> Style {
        self.fg(Color::Red)
    }

    /// Diff hunk headers.
    pub fn hunk(&self) -> Style {
        self.fg(Color::Cyan)
    }

    /// The status line.
    pub fn status(&self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }

    /// The selected entry of a picker.
    pub fn selected(&self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }
}
