/**
 * Word lists of the synthetic email task. Everything is ASCII and digit-free except house numbers
 * (at most two digits), so no background text can contain a four-digit run that looks like a code.
 */
export const FIRST_NAMES: readonly string[] = [
  'Ada', 'Alma', 'Ben', 'Cara', 'Cyrus', 'Dana', 'Dev', 'Edith', 'Ezra', 'Fay', 'Gus', 'Hana',
  'Hugo', 'Ines', 'Ivan', 'Jade', 'Joel', 'Kai', 'Lena', 'Leon', 'Mara', 'Milo', 'Nia', 'Noel',
  'Omar', 'Opal', 'Pia', 'Quinn', 'Rafe', 'Rosa', 'Saul', 'Suki', 'Tess', 'Theo', 'Uma', 'Vera',
  'Vik', 'Wade', 'Wren', 'Xena', 'Yara', 'Yves', 'Zane', 'Zoe', 'Abel', 'Beth', 'Cole', 'Dora',
];

export const LAST_NAMES: readonly string[] = [
  'Abbott', 'Baker', 'Castro', 'Dunn', 'Ellis', 'Frost', 'Grant', 'Hale', 'Ivers', 'Jonas',
  'Keane', 'Lowe', 'Moss', 'Nash', 'Ortiz', 'Price', 'Quill', 'Reyes', 'Shaw', 'Tate', 'Upton',
  'Vance', 'Walsh', 'Young', 'Zeller', 'Banks', 'Cross', 'Drake', 'Finch', 'Gale', 'Hayes',
  'Irwin', 'Kemp', 'Lyons', 'Marsh', 'Noble', 'Pike', 'Rhodes', 'Stone', 'Torres', 'Voss',
  'Webb', 'Wolfe', 'York', 'Bishop', 'Carver', 'Dalton', 'Fields',
];

export const STREETS: readonly string[] = [
  'Elm', 'Oak', 'Pine', 'Birch', 'Cedar', 'Maple', 'Ash', 'Willow', 'Hill', 'Lake', 'Mill',
  'Park', 'River', 'Rose', 'Spring', 'Vale', 'Bay', 'Church', 'Field', 'Grove',
];

/** [short, long] street suffixes: compact style shows the short form. */
export const STREET_SUFFIXES: readonly (readonly [string, string])[] = [
  ['St', 'Street'],
  ['Rd', 'Road'],
  ['Ave', 'Avenue'],
  ['Ln', 'Lane'],
];

export const CITIES: readonly string[] = [
  'Brookfield', 'Ashford', 'Fairview', 'Kingsley', 'Milton', 'Northgate', 'Oakridge', 'Redwood',
  'Southport', 'Westbury', 'Clearwater', 'Hollis',
];

/** Highest house number: two digits at most, so an address never holds a four-digit run. */
export const MAX_HOUSE_NUMBER = 99;
